// Preset clusters. Numbers are datasheet peaks (FP32 without tensor cores, since the zoo counts FP32
// FLOPs) with their sources; latencies and launch overheads are typical measured magnitudes, not
// datasheet values, and efficiencies are the fraction of peak a large op reaches. docs/simulator.md
// lists the presets; edit a dumped JSON (`placelab cluster --preset NAME --out F`) to change any number.
#include "sim/presets.h"

#include <algorithm>
#include <charconv>
#include <functional>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"

namespace placelab::sim {

namespace {

constexpr double G = 1e9, T = 1e12, GiB = 1024.0 * 1024 * 1024;

// PCIe 3.0 x16: 8 GT/s x 16 lanes x 128/130 encoding = 15.75 GB/s per direction (PCI-SIG spec).
constexpr double kPcie3x16 = 15.75 * G;
constexpr double kPcieLatency = 2e-6;    // typical cudaMemcpy peer latency over one PCIe hop
constexpr double kNvlinkLatency = 1e-6;  // typical NVLink hop latency
constexpr double kGpuLaunch = 5e-6;      // typical CUDA kernel launch + framework dispatch per op
constexpr double kGpuEfficiency = 0.7;
constexpr double kCpuLaunch = 2e-6;
constexpr double kCpuEfficiency = 0.5;

struct Builder {
  ClusterSpec spec;

  void device(std::string name, std::string kind, double flops, double bw, double mem, double launch, double eff) {
    spec.devices.push_back(Device{.name = std::move(name), .kind = std::move(kind), .peak_flops_per_s = flops,
                                  .memory_bandwidth_bytes_per_s = bw, .memory_bytes = mem,
                                  .launch_overhead_s = launch, .efficiency = eff});
  }
  void link(std::string name, std::string a, std::string b, double bw, double latency) {
    spec.links.push_back(Link{.name = std::move(name), .end_a = std::move(a), .end_b = std::move(b),
                              .bandwidth_bytes_per_s = bw, .latency_s = latency});
  }
};

std::string gpu(int i) { return fmt::format("gpu{}", i); }

// Datasheet devices.
// Tesla K80: one GK210 die is one CUDA device; per die 4.37 TFLOPS FP32 (boost), 240 GB/s GDDR5, 12 GiB
// (NVIDIA Tesla K80 datasheet: 8.73 TFLOPS, 480 GB/s, 24 GB per two-die board).
void k80(Builder& b, const std::string& name) { b.device(name, "k80", 4.37 * T, 240 * G, 12 * GiB, kGpuLaunch, kGpuEfficiency); }
// Tesla P100 SXM2: 10.6 TFLOPS FP32, 732 GB/s HBM2, 16 GiB (NVIDIA Tesla P100 datasheet).
void p100(Builder& b, const std::string& name) { b.device(name, "p100", 10.6 * T, 732 * G, 16 * GiB, kGpuLaunch, kGpuEfficiency); }
// Tesla V100 SXM2: 15.7 TFLOPS FP32, 900 GB/s, 16 GiB; PCIe: 14 TFLOPS (NVIDIA V100 datasheet).
void v100_sxm(Builder& b, const std::string& name) { b.device(name, "v100", 15.7 * T, 900 * G, 16 * GiB, kGpuLaunch, kGpuEfficiency); }
void v100_pcie(Builder& b, const std::string& name) { b.device(name, "v100", 14 * T, 900 * G, 16 * GiB, kGpuLaunch, kGpuEfficiency); }
// V100 SXM3 32GB (DGX-2): 15.7 TFLOPS FP32, 900 GB/s HBM2 (NVIDIA DGX-2 datasheet); the same kind.
void v100_32gb(Builder& b, const std::string& name) { b.device(name, "v100", 15.7 * T, 900 * G, 32 * GiB, kGpuLaunch, kGpuEfficiency); }
// A100 SXM4 40GB: 19.5 TFLOPS FP32, 1555 GB/s HBM2 (NVIDIA A100 datasheet).
void a100(Builder& b, const std::string& name) { b.device(name, "a100", 19.5 * T, 1555 * G, 40 * GiB, kGpuLaunch, kGpuEfficiency); }
// A100 SXM4 80GB: the same GA100 at 19.5 TFLOPS FP32, 2039 GB/s HBM2e (NVIDIA A100 datasheet); the same kind.
void a100_80gb(Builder& b, const std::string& name) { b.device(name, "a100", 19.5 * T, 2039 * G, 80 * GiB, kGpuLaunch, kGpuEfficiency); }
// H100 SXM5 80GB: 67 TFLOPS FP32, 3.35 TB/s HBM3 (NVIDIA H100 datasheet).
void h100(Builder& b, const std::string& name) { b.device(name, "h100", 67 * T, 3350 * G, 80 * GiB, kGpuLaunch, kGpuEfficiency); }
// Xeon Platinum 8380 socket: 40 cores x 2.3 GHz x 32 FP32 FLOP/cycle (two AVX-512 FMA units) = 2.94 TFLOPS;
// 8 channels DDR4-3200 = 204.8 GB/s (Intel ARK); 256 GiB of DRAM per socket is our choice.
void xeon(Builder& b, const std::string& name) { b.device(name, "cpu", 2.944 * T, 204.8 * G, 256 * GiB, kCpuLaunch, kCpuEfficiency); }

// A dual-socket host: GPUs in pairs behind PCIe switches, switches 0,1 on socket 0 and 2,3 on socket 1
// (the DGX-1 / p2.8xlarge layout), sockets joined by QPI: 2 links x 9.6 GT/s x 2 bytes = 38.4 GB/s per
// direction (Intel Xeon E5-2600 v4 datasheet).
void pcie_host(Builder& b, int gpus, double pcie_bw, const std::string& prefix = "") {
  int switches = (gpus + 1) / 2;
  for (int s = 0; s < switches; ++s) {
    std::string sw = fmt::format("{}pcie_switch{}", prefix, s), socket = fmt::format("{}socket{}", prefix, s / 2);
    b.link(sw + "-" + socket, sw, socket, pcie_bw, kPcieLatency);
  }
  for (int g = 0; g < gpus; ++g)
    b.link(prefix + gpu(g) + "-pcie", prefix + gpu(g), fmt::format("{}pcie_switch{}", prefix, g / 2), pcie_bw, kPcieLatency);
  if (switches > 2) b.link(prefix + "qpi", prefix + "socket0", prefix + "socket1", 38.4 * G, 0.5e-6);
}

// DGX-1 hybrid cube mesh (NVIDIA DGX-1 System Architecture white paper, 2017; `nvidia-smi topo -m` on a
// DGX-1V): pairs and their NVLink counts. P100 has one link per listed pair.
struct NvPair {
  int a, b, links_v100;
};
constexpr NvPair kCubeMesh[] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2},
                                {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2},
                                {5, 7, 1}, {6, 7, 2}};

void cube_mesh(Builder& b, int gpus, double link_bw, bool v100) {
  for (const NvPair& p : kCubeMesh)
    if (p.a < gpus && p.b < gpus)
      b.link(fmt::format("nvlink{}-{}", p.a, p.b), gpu(p.a), gpu(p.b), link_bw * (v100 ? p.links_v100 : 1), kNvlinkLatency);
}

// NVSwitch: every GPU has all its NVLinks to the switch fabric, a full crossbar.
void nvswitch(Builder& b, int gpus, double bw_per_direction) {
  for (int g = 0; g < gpus; ++g) b.link(gpu(g) + "-nvswitch", gpu(g), "nvswitch", bw_per_direction, kNvlinkLatency);
}

// One GPU per host, on PCIe to its host; hosts joined through one `net` switch, each by a link of `bw` per direction.
void hosts_on_switch(Builder& b, int n, void (*gpu_of)(Builder&, const std::string&), const std::string& net, double bw,
                     double latency) {
  for (int h = 0; h < n; ++h) {
    gpu_of(b, gpu(h));
    b.link(gpu(h) + "-pcie", gpu(h), fmt::format("host{}", h), kPcie3x16, kPcieLatency);
    if (n > 1) b.link(fmt::format("host{}-{}", h, net), fmt::format("host{}", h), net + "_switch", bw, latency);
  }
}

using Make = std::function<void(Builder&, int)>;

struct Family {
  PresetInfo info;
  Make make;
};

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {{"k80", {1, 2, 4, 8}, "AWS p2.8xlarge (Placeto, HDP): K80 dies, two per board behind a PCIe switch"},
       [](Builder& b, int n) {
         for (int g = 0; g < n; ++g) k80(b, gpu(g));
         pcie_host(b, n, kPcie3x16);
       }},
      {{"p100", {1, 2, 4, 8}, "DGX-1 (P100): hybrid cube-mesh NVLink 1.0 (20 GB/s per link), PCIe elsewhere"},
       [](Builder& b, int n) {
         for (int g = 0; g < n; ++g) p100(b, gpu(g));
         // NVLink 1.0: 20 GB/s per direction per link (P100 datasheet: 160 GB/s over 4 links, both directions).
         cube_mesh(b, n, 20 * G, false);
         pcie_host(b, n, kPcie3x16);
       }},
      {{"v100-nvlink", {1, 2, 4, 8}, "DGX-1V: V100 SXM2, hybrid cube-mesh NVLink 2.0 (25 GB/s per link), PCIe elsewhere"},
       [](Builder& b, int n) {
         for (int g = 0; g < n; ++g) v100_sxm(b, gpu(g));
         // NVLink 2.0: 25 GB/s per direction per link (V100 datasheet: 300 GB/s over 6 links, both directions).
         cube_mesh(b, n, 25 * G, true);
         pcie_host(b, n, kPcie3x16);
       }},
      {{"v100-pcie", {1, 2, 4, 8}, "V100 PCIe cards in a dual-socket host, no NVLink"},
       [](Builder& b, int n) {
         for (int g = 0; g < n; ++g) v100_pcie(b, gpu(g));
         pcie_host(b, n, kPcie3x16);
       }},
      {{"a100", {1, 2, 4, 8}, "DGX A100: A100 SXM4 40GB on NVSwitch (12 NVLink 3.0 = 300 GB/s per direction)"},
       [](Builder& b, int n) {
         for (int g = 0; g < n; ++g) a100(b, gpu(g));
         nvswitch(b, n, 300 * G);  // DGX A100 datasheet: 600 GB/s GPU-to-GPU bidirectional
       }},
      {{"h100", {1, 2, 4, 8}, "DGX H100: H100 SXM5 80GB on NVSwitch (18 NVLink 4.0 = 450 GB/s per direction)"},
       [](Builder& b, int n) {
         for (int g = 0; g < n; ++g) h100(b, gpu(g));
         nvswitch(b, n, 450 * G);  // DGX H100 datasheet: 900 GB/s GPU-to-GPU bidirectional
       }},
      {{"cpu", {1, 2}, "Xeon Platinum 8380 host: one device per socket, sockets joined by 3 UPI links"},
       [](Builder& b, int n) {
         for (int s = 0; s < n; ++s) xeon(b, fmt::format("cpu{}", s));
         // UPI: 3 links x 11.2 GT/s ~ 3 x 22.4 GB/s per direction (Intel Xeon Scalable 3rd gen).
         if (n == 2) b.link("upi", "cpu0", "cpu1", 67.2 * G, 0.5e-6);
       }},
      {{"cpu-gpu", {1, 2, 4, 8}, "a CPU + GPU server: one CPU socket and V100 PCIe GPUs in one host"},
       [](Builder& b, int n) {
         xeon(b, "cpu0");
         for (int g = 0; g < n; ++g) v100_pcie(b, gpu(g));
         // GPUs in pairs behind PCIe switches on the socket's root complex; the CPU side of a transfer
         // is its DRAM (204.8 GB/s), so the PCIe hops are the bottleneck.
         b.link("cpu0-dram", "cpu0", "root_complex", 204.8 * G, 0);
         for (int s = 0; s < (n + 1) / 2; ++s)
           b.link(fmt::format("pcie_switch{}-root", s), fmt::format("pcie_switch{}", s), "root_complex", kPcie3x16, kPcieLatency);
         for (int g = 0; g < n; ++g)
           b.link(gpu(g) + "-pcie", gpu(g), fmt::format("pcie_switch{}", g / 2), kPcie3x16, kPcieLatency);
       }},
      {{"desktop-igpu", {1}, "HSDAG's kind of machine: a desktop CPU and its integrated GPU sharing DDR5"},
       [](Builder& b, int) {
         // Core i9-12900K (Intel ARK): 8 P-cores x 32 FP32 FLOP/cycle (two 256-bit FMA units) x 4.9 GHz
         // all-core turbo + 8 E-cores x 16 FLOP/cycle x 3.7 GHz = 1.73 TFLOPS; dual-channel DDR5-4800
         // = 76.8 GB/s. Its UHD Graphics 770: 32 EUs x 16 FP32 FLOP/cycle x 1.55 GHz = 0.79 TFLOPS, on the
         // same DDR5. 32 GiB of DRAM, of which the GPU may map half (Intel's shared-memory limit).
         b.device("cpu0", "cpu", 1.728 * T, 76.8 * G, 32 * GiB, kCpuLaunch, kCpuEfficiency);
         // OpenCL kernel enqueue on an integrated GPU: ~10 us per op (typical magnitude).
         b.device("igpu0", "igpu", 0.7936 * T, 76.8 * G, 16 * GiB, 10e-6, kGpuEfficiency);
         // A tensor changes device by a copy through DRAM (read + write: half of 76.8 GB/s) after a queue
         // synchronisation (~20 us, typical magnitude). Both devices draw on one DRAM: the simulator
         // gives each its full bandwidth, so overlapped memory-bound ops are optimistic.
         b.link("shared-dram", "cpu0", "igpu0", 38.4 * G, 20e-6);
       }},
      {{"eth", {1, 2, 4, 8}, "one V100 PCIe per host, hosts on 25 Gb Ethernet through one switch"},
       // 25 GbE = 3.125 GB/s per direction; ~10 us TCP latency per hop (typical).
       [](Builder& b, int n) { hosts_on_switch(b, n, v100_pcie, "eth", 3.125 * G, 10e-6); }},
      {{"k80-eth", {1, 2, 4, 8}, "one K80 die per host (AWS p2.xlarge), hosts on 10 Gb Ethernet through one switch"},
       // 10 GbE = 1.25 GB/s per direction; the same ~10 us TCP latency per hop.
       [](Builder& b, int n) { hosts_on_switch(b, n, k80, "eth", 1.25 * G, 10e-6); }},
      {{"ib", {1, 2, 4, 8}, "one V100 PCIe per host, hosts on InfiniBand EDR through one switch"},
       // EDR 4x: 100 Gb/s = 12.5 GB/s per direction; ~1 us RDMA latency per hop (Mellanox EDR specs).
       [](Builder& b, int n) { hosts_on_switch(b, n, v100_pcie, "ib", 12.5 * G, 1e-6); }},
      {{"placeto", {1, 2, 4, 8}, "Placeto's published simulator: one outgoing FIFO bus per device, broadcast"},
       [](Builder& b, int n) {
         // Placeto (Addanki et al. 2019), its simulator's constants: transfers at 7600 bytes/us on one
         // outgoing bus per device, one transfer per tensor to all remote consumers, a 5.7 us gap after
         // each op, the bus busy 25 us more after each transfer; devices identical (K80 numbers).
         for (int g = 0; g < n; ++g) {
           k80(b, gpu(g));
           b.spec.devices.back().launch_overhead_s = 0;
           b.spec.devices.back().gap_after_op_s = 5.7e-6;
           b.spec.links.push_back(Link{.name = gpu(g) + "-bus", .bandwidth_bytes_per_s = 7600e6,
                                       .duplex = Duplex::half, .busy_after_s = 25e-6});
         }
         for (int s = 0; s < n; ++s)
           for (int t = 0; t < n; ++t)
             if (s != t) b.spec.routes.push_back(RouteSpec{.src = gpu(s), .dst = gpu(t), .links = {gpu(s) + "-bus"}});
         b.spec.transfer_mode = TransferMode::broadcast;
         // Its device queues are FIFO, and it adds times in microseconds (docs/simulator.md, "Placeto's simulator").
         b.spec.priority = Priority::fifo;
         b.spec.clock_unit_s = 1e-6;
       }},
  };
  return all;
}

// --- Multi-node DGX clusters (docs/simulator.md, "Multi-node presets") ---

// A DGX node kind: its GPU, NVLink bandwidth per GPU through the NVSwitch chips, and its NIC per GPU.
struct NodeKind {
  std::string_view kind;
  void (*gpu)(Builder&, const std::string&);
  double nvlink_bytes_per_s;  // per direction per GPU
  double nic_bytes_per_s;     // per direction per NIC
  std::string_view summary;
};
// DGX H100 datasheet: 4 NVSwitch chips, 900 GB/s GPU-to-GPU bidirectional; 8 single-port ConnectX-7 at 400 Gb/s
// NDR InfiniBand = 50 GB/s per direction. DGX A100 datasheet: 6 NVSwitch chips, 600 GB/s bidirectional; 8
// single-port ConnectX-6 at 200 Gb/s HDR = 25 GB/s. PCIe (Gen5 x16: 63 GB/s; Gen4 x16: 31.5 GB/s per direction)
// is faster than either NIC, so the NIC link stands for the whole GPU -> PCIe switch -> NIC -> cable path.
constexpr NodeKind kNodeKinds[] = {
    {"h100", h100, 450 * G, 50 * G,
     "DGX H100 nodes: 8 H100 SXM5 80GB on NVSwitch (450 GB/s), a 400 Gb/s NDR NIC per GPU, rail leaves, spine"},
    {"a100", a100_80gb, 300 * G, 25 * G,
     "DGX A100 nodes: 8 A100 SXM4 80GB on NVSwitch (300 GB/s), a 200 Gb/s HDR NIC per GPU, rail leaves, spine"},
    // DGX-2 datasheet: 12 NVSwitch chips, 300 GB/s GPU-to-GPU bidirectional; 100 Gb/s EDR = 12.5 GB/s per NIC.
    {"v100", v100_32gb, 150 * G, 12.5 * G,
     "DGX-2-style nodes: 8 V100 SXM3 32GB on NVSwitch (150 GB/s), a 100 Gb/s EDR NIC per GPU, rail leaves, spine"},
};
// Typical magnitudes, not datasheet values: a GPUDirect RDMA hop into the fabric (PCIe, the HCA, the cable,
// the leaf switch) ~1 us; the spine level adds ~1 us over its four links (cables and switch hops up and down).
constexpr double kNicLatency = 1e-6;
constexpr double kSpineLinkLatency = 0.25e-6;

const NodeKind* node_kind(std::string_view kind) {
  for (const NodeKind& k : kNodeKinds)
    if (k.kind == kind) return &k;
  return nullptr;
}

// Throws naming `name`, the field at fault and the grammar.
void check_multinode(const MultiNodeSpec& s, std::string_view name) {
  auto fail = [&](const std::string& what) {
    throw Error(fmt::format("multi-node cluster \"{}\": {}; multi-node presets are {}", name, what, kMultiNodeGrammar));
  };
  if (!node_kind(s.kind)) fail(fmt::format("no node kind \"{}\"", s.kind));
  if (s.nodes < 1 || s.nodes > kMaxNodes)
    fail(fmt::format("{} nodes, expected 1..{} (at most {} GPUs)", s.nodes, kMaxNodes, 8 * kMaxNodes));
  if (s.gpus_per_node != 1 && s.gpus_per_node != 2 && s.gpus_per_node != 4 && s.gpus_per_node != 8)
    fail(fmt::format("{} GPUs per node, expected 1, 2, 4 or 8", s.gpus_per_node));
  if (s.oversubscription < 1 || s.oversubscription > kMaxNodes)
    fail(fmt::format("oversubscription {}, expected 1..{}", s.oversubscription, kMaxNodes));
}

// Reads a decimal number off the front of `text`.
bool take_number(std::string_view& text, int& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end == text.data() || text.front() == '-') return false;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return true;
}

bool take(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// GPUs n<node>.gpu<i>; inside a node, each GPU's NVLinks to the node's NVSwitch. Between nodes, GPU i's NIC
// ends at its own port of leaf switch i (rail i). A port reaches the other ports of its leaf through the
// leaf's crossbar, and the spine through the leaf's uplink for its block of R nodes: routes are computed,
// and a port's uplink is fixed by the topology, as InfiniBand's static routing fixes it. Port links carry
// only their NIC's traffic, so they add no contention of their own.
Cluster build_multinode(const MultiNodeSpec& s, const NodeKind& k) {
  Builder b;
  b.spec.name = multinode_name(s);
  const int nodes = s.nodes, gpus = s.gpus_per_node;
  auto gpu_name = [](int n, int i) { return fmt::format("n{}.gpu{}", n, i); };
  auto port = [](int i, int n) { return fmt::format("leaf{}.port{}", i, n); };
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < gpus; ++i) k.gpu(b, gpu_name(n, i));
  if (gpus > 1)
    for (int n = 0; n < nodes; ++n)
      for (int i = 0; i < gpus; ++i)
        b.link(gpu_name(n, i) + "-nvlink", gpu_name(n, i), fmt::format("n{}.nvswitch", n), k.nvlink_bytes_per_s, kNvlinkLatency);
  if (nodes == 1) return Cluster(std::move(b.spec));
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < gpus; ++i) b.link(gpu_name(n, i) + "-nic", gpu_name(n, i), port(i, n), k.nic_bytes_per_s, kNicLatency);
  for (int i = 0; i < gpus; ++i)
    for (int n = 0; n < nodes; ++n) b.link(port(i, n) + "-xbar", port(i, n), fmt::format("leaf{}", i), k.nic_bytes_per_s, 0);
  if (gpus == 1) return Cluster(std::move(b.spec));  // one rail: no spine
  const int uplinks = (nodes + s.oversubscription - 1) / s.oversubscription;
  for (int i = 0; i < gpus; ++i)
    for (int n = 0; n < nodes; ++n)
      b.link(port(i, n) + "-up", port(i, n), fmt::format("leaf{}.up{}", i, n / s.oversubscription), k.nic_bytes_per_s,
             kSpineLinkLatency);
  for (int i = 0; i < gpus; ++i)
    for (int u = 0; u < uplinks; ++u)
      b.link(fmt::format("leaf{}.up{}-spine", i, u), fmt::format("leaf{}.up{}", i, u), "spine", k.nic_bytes_per_s,
             kSpineLinkLatency);
  return Cluster(std::move(b.spec));
}

}  // namespace

const std::vector<MultiNodeFamily>& multinode_families() {
  static const std::vector<MultiNodeFamily> all = [] {
    std::vector<MultiNodeFamily> out;
    for (const NodeKind& k : kNodeKinds) out.push_back({fmt::format("{}-nodes", k.kind), std::string(k.summary)});
    return out;
  }();
  return all;
}

std::string multinode_name(const MultiNodeSpec& s) {
  std::string name = fmt::format("{}-nodes-{}x{}", s.kind, s.nodes, s.gpus_per_node);
  if (s.oversubscription != 1) name += fmt::format("-os{}", s.oversubscription);
  return name;
}

std::optional<MultiNodeSpec> parse_multinode_name(std::string_view name) {
  constexpr std::string_view kTag = "-nodes-";
  const size_t tag = name.find(kTag);
  if (tag == std::string_view::npos) return std::nullopt;
  MultiNodeSpec s;
  s.kind = std::string(name.substr(0, tag));
  std::string_view rest = name.substr(tag + kTag.size());
  if (!take_number(rest, s.nodes) || !take(rest, "x") || !take_number(rest, s.gpus_per_node) ||
      !(rest.empty() || (take(rest, "-os") && take_number(rest, s.oversubscription) && rest.empty())))
    throw Error(fmt::format("multi-node cluster \"{}\": expected NxG[-osR] after \"-nodes-\"; multi-node presets are {}",
                            name, kMultiNodeGrammar));
  check_multinode(s, name);
  return s;
}

Cluster make_multinode(const MultiNodeSpec& spec) {
  check_multinode(spec, multinode_name(spec));
  return build_multinode(spec, *node_kind(spec.kind));
}

const std::vector<PresetInfo>& preset_families() {
  static const std::vector<PresetInfo> infos = [] {
    std::vector<PresetInfo> out;
    for (const auto& f : families()) out.push_back(f.info);
    return out;
  }();
  return infos;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const auto& f : families())
    for (int n : f.info.sizes) out.push_back(fmt::format("{}-{}", f.info.family, n));
  return out;
}

Cluster make_preset(std::string_view name) {
  if (auto spec = parse_multinode_name(name)) return make_multinode(*spec);
  auto dash = name.rfind('-');
  if (dash != std::string_view::npos) {
    std::string_view family = name.substr(0, dash), count = name.substr(dash + 1);
    int n = 0;
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
    if (ec == std::errc() && end == count.data() + count.size()) {
      for (const auto& f : families()) {
        if (f.info.family != family || std::find(f.info.sizes.begin(), f.info.sizes.end(), n) == f.info.sizes.end())
          continue;
        Builder b;
        b.spec.name = std::string(name);
        f.make(b, n);
        return Cluster(std::move(b.spec));
      }
    }
  }
  std::string names;
  for (const auto& f : families()) {
    std::string sizes;
    for (int n : f.info.sizes) sizes += fmt::format("{}{}", sizes.empty() ? "" : "|", n);
    names += fmt::format("{}{}-{{{}}}", names.empty() ? "" : ", ", f.info.family, sizes);
  }
  throw Error(fmt::format("unknown cluster preset \"{}\" (presets: {}; multi-node: {})", name, names, kMultiNodeGrammar));
}

Cluster load_cluster(const std::string& spec) {
  if (io::names_a_file(spec)) return read_cluster(spec);
  try {
    return make_preset(spec);
  } catch (const Error& e) {
    throw Error(fmt::format("{}; no file \"{}\" exists either", e.what(), spec));
  }
}

Cluster msr_cluster(int accelerators, int cpus, double accelerator_memory_bytes) {
  const int64_t devices = int64_t{accelerators} + cpus;
  if (accelerators < 0 || cpus < 0 || devices == 0)
    throw Error(fmt::format("msr cluster: {} accelerators and {} CPUs; need at least one device", accelerators, cpus));
  if (devices > static_cast<int64_t>(kMaxDevices))  // before building them all
    throw Error(fmt::format("msr cluster: {} accelerators and {} CPUs make {} devices, at most {} (a route is kept per "
                            "pair of devices)", accelerators, cpus, devices, kMaxDevices));
  Builder b;
  b.spec.name = fmt::format("msr-{}acc-{}cpu", accelerators, cpus);
  // Op times and transfer costs come from the instance; these rates only matter for ops without them.
  for (int a = 0; a < accelerators; ++a) {
    b.device(fmt::format("acc{}", a), std::string(kAcceleratorKind), 1 * T, 100 * G, accelerator_memory_bytes, 0, 1);
    b.link(fmt::format("acc{}-host", a), fmt::format("acc{}", a), "host", kPcie3x16, 0);
  }
  for (int c = 0; c < cpus; ++c) {
    b.device(fmt::format("cpu{}", c), std::string(kCpuKind), 0.1 * T, 100 * G, 1e15, 0, 1);
    b.link(fmt::format("cpu{}-host", c), fmt::format("cpu{}", c), "host", kPcie3x16, 0);
  }
  return Cluster(std::move(b.spec));
}

Cluster msr_cluster(const graphs::MsrInstance& instance) {
  return msr_cluster(instance.max_accelerators, instance.max_cpus, instance.accelerator_memory_bytes);
}

}  // namespace placelab::sim
