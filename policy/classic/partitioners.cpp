// Graph partitioners as GDP (METIS) and Placeto / Tarnawski et al. (Scotch) ran them as baselines: the
// op graph, undirected, with compute time as vertex weight and tensor bytes as edge weight, cut into one
// part per device with target part weights proportional to device speed (heterogeneous clusters).
// Colocation classes are vertices (contracted without merging cycles: direction does not matter here).
#include <algorithm>
#include <cmath>
#include <cstdio>  // scotch.h needs FILE
#include <map>

#include <fmt/format.h>
#include <metis.h>
#include <scotch.h>

#include "graphs/error.h"
#include "policy/classic/units.h"

namespace placelab::policy {

namespace {

/** The unit graph in CSR form with integer weights (both partitioners take integers). */
struct WeightedGraph {
  std::vector<int64_t> offset{0}, adjacency, vertex_weight, edge_weight;
  std::vector<double> part_share;  // relative speed of each device
};

/** Scales positive values so that their sum is about `total`, each at least 1. */
std::vector<int64_t> integer_weights(const std::vector<double>& values, double total) {
  double sum = 0;
  for (double v : values) sum += v;
  std::vector<int64_t> out(values.size(), 1);
  if (sum <= 0) return out;
  for (size_t i = 0; i < values.size(); ++i) out[i] = std::max<int64_t>(1, std::llround(values[i] / sum * total));
  return out;
}

WeightedGraph weighted_graph(const Units& units) {
  const graphs::Graph& g = units.simulator().graph();
  const int32_t n = units.num_units();
  std::vector<std::map<int32_t, double>> adj(n);  // undirected, merged
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    int32_t a = units.unit_of(g.edge_src(e)), b = units.unit_of(g.edge_dst(e));
    if (a == b) continue;
    adj[a][b] += g.edge_bytes(e);
    adj[b][a] += g.edge_bytes(e);
  }
  std::vector<double> vw(n), ew;
  for (int32_t u = 0; u < n; ++u) vw[u] = units.mean_time_s(u);
  WeightedGraph wg;
  for (int32_t u = 0; u < n; ++u) {
    for (const auto& [v, bytes] : adj[u]) {
      wg.adjacency.push_back(v);
      ew.push_back(bytes);
    }
    wg.offset.push_back(static_cast<int64_t>(wg.adjacency.size()));
  }
  // Totals stay far below 2^31 so that 32-bit builds of both libraries add them up safely.
  wg.vertex_weight = integer_weights(vw, 1e7);
  wg.edge_weight = integer_weights(ew, 1e7);
  wg.part_share = device_speeds(units);
  return wg;
}

/** Units placed by part; units pinned off their part's kind go to their fastest allowed device. */
PlaceResult finish(const Units& units, std::vector<int32_t> part, nlohmann::json info) {
  int32_t moved = 0;
  for (int32_t u = 0; u < units.num_units(); ++u)
    if (!units.allowed(u, part[u])) part[u] = units.allowed_devices(u)[0], ++moved;
  info["moved_for_pins"] = moved;
  return {units.expand(part), std::move(info)};
}

template <class T>
std::vector<T> narrow(const std::vector<int64_t>& v) {
  return std::vector<T>(v.begin(), v.end());
}

class MetisPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("metis", request.options, {"imbalance"});
    const double imbalance = option_number("metis", request.options, "imbalance", 1.03, 1.0);
    Units units(request.simulator);
    const int32_t n = units.num_units(), k = units.num_devices();
    if (k == 1 || n <= 1) return finish(units, std::vector<int32_t>(n, 0), {{"edge_cut", 0}});
    WeightedGraph wg = weighted_graph(units);
    idx_t nvtxs = n, ncon = 1, nparts = k, objval = 0;
    std::vector<idx_t> xadj = narrow<idx_t>(wg.offset), adjncy = narrow<idx_t>(wg.adjacency),
                       vwgt = narrow<idx_t>(wg.vertex_weight), adjwgt = narrow<idx_t>(wg.edge_weight), part(n, 0);
    double share_sum = 0;
    for (double s : wg.part_share) share_sum += s;
    std::vector<real_t> tpwgts;
    for (double s : wg.part_share) tpwgts.push_back(static_cast<real_t>(s / share_sum));
    real_t ubvec = static_cast<real_t>(imbalance);
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = static_cast<idx_t>(request.seed % 1000000007);
    options[METIS_OPTION_NUMBERING] = 0;
    // An edgeless graph has empty adjacency arrays; METIS wants valid pointers all the same.
    if (adjncy.empty()) adjncy.push_back(0), adjwgt.push_back(0);
    int status = METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr, adjwgt.data(),
                                     &nparts, tpwgts.data(), &ubvec, options, &objval, part.data());
    if (status != METIS_OK) throw Error(fmt::format("placer metis: METIS_PartGraphKway failed (status {})", status));
    return finish(units, std::vector<int32_t>(part.begin(), part.end()), {{"edge_cut", objval}});
  }
};

class ScotchPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("scotch", request.options, {});
    Units units(request.simulator);
    const int32_t n = units.num_units(), k = units.num_devices();
    if (k == 1 || n <= 1) return finish(units, std::vector<int32_t>(n, 0), {});
    WeightedGraph wg = weighted_graph(units);
    std::vector<SCOTCH_Num> verttab = narrow<SCOTCH_Num>(wg.offset), edgetab = narrow<SCOTCH_Num>(wg.adjacency),
                            velotab = narrow<SCOTCH_Num>(wg.vertex_weight), edlotab = narrow<SCOTCH_Num>(wg.edge_weight),
                            parttab(n, 0);
    std::vector<double> share(wg.part_share.begin(), wg.part_share.end());
    std::vector<SCOTCH_Num> arch_weight;
    for (int64_t w : integer_weights(share, 1e4)) arch_weight.push_back(static_cast<SCOTCH_Num>(w));
    // A context of our own: one thread, deterministic mode and our seed, so the same seed gives the
    // same mapping (the global default may run threads whose timing changes the result).
    SCOTCH_Context context;
    SCOTCH_Graph graph, bound;
    SCOTCH_Arch arch;
    SCOTCH_Strat strat;
    SCOTCH_contextInit(&context);
    SCOTCH_graphInit(&graph);
    SCOTCH_archInit(&arch);
    SCOTCH_stratInit(&strat);
    int status = SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMDETERMINISTIC, 1);
    if (status == 0) status = SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMRANDOMFIXEDSEED, 1);
    if (status == 0) status = SCOTCH_contextRandomClone(&context);
    if (status == 0) SCOTCH_contextRandomSeed(&context, static_cast<SCOTCH_Num>(request.seed % 1000000007));
    if (status == 0) status = SCOTCH_contextThreadSpawn(&context, 1, nullptr);
    if (status == 0)
      status = SCOTCH_graphBuild(&graph, 0, n, verttab.data(), nullptr, velotab.data(), nullptr,
                                 static_cast<SCOTCH_Num>(edgetab.size()), edgetab.data(), edlotab.data());
    bool bound_ok = false;
    if (status == 0) bound_ok = (status = SCOTCH_contextBindGraph(&context, &graph, &bound)) == 0;
    if (status == 0) status = SCOTCH_archCmpltw(&arch, k, arch_weight.data());
    if (status == 0) status = SCOTCH_graphMap(&bound, &arch, &strat, parttab.data());
    SCOTCH_stratExit(&strat);
    SCOTCH_archExit(&arch);
    if (bound_ok) SCOTCH_graphExit(&bound);
    SCOTCH_graphExit(&graph);
    SCOTCH_contextExit(&context);
    if (status != 0) throw Error(fmt::format("placer scotch: libscotch failed (status {})", status));
    return finish(units, std::vector<int32_t>(parttab.begin(), parttab.end()), {});
  }
};

}  // namespace

std::unique_ptr<Placer> make_metis_placer() { return std::make_unique<MetisPlacer>(); }
std::unique_ptr<Placer> make_scotch_placer() { return std::make_unique<ScotchPlacer>(); }

}  // namespace placelab::policy
