// The zoo's registry: every generator with its parameters, defaults and valid ranges, and the
// checking of user-given parameters before a generator runs.
#include "graphs/zoo/zoo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "graphs/error.h"
#include "graphs/zoo/families.h"

namespace placelab::graphs::zoo {

namespace {

struct ParamSpec {
  std::string name;
  double value;
  double min, max;
  bool integer;
  std::string help;
};

struct Generator {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  Graph (*build)(const Args&);
};

constexpr double kMaxSeed = 4294967295.0;

ParamSpec integer(std::string name, double value, double min, double max, std::string help) {
  return {std::move(name), value, min, max, true, std::move(help)};
}
ParamSpec real(std::string name, double value, double min, double max, std::string help) {
  return {std::move(name), value, min, max, false, std::move(help)};
}

// Params shared by several models keep one name and one meaning.
ParamSpec batch(double value) { return integer("batch", value, 1, 65536, "examples per step"); }
ParamSpec seed() { return integer("seed", 0, 0, kMaxSeed, "random seed: the same seed gives the same graph"); }
ParamSpec layers(double value, double max, std::string help) {
  return integer("layers", value, 1, max, std::move(help));
}
ParamSpec steps(double value) { return integer("steps", value, 1, 1000, "unrolled time steps"); }
ParamSpec hidden(double value, std::string help = "hidden units (model width)") {
  return integer("hidden", value, 4, 16384, std::move(help));
}
ParamSpec heads(double value) { return integer("heads", value, 1, 256, "attention heads (must divide hidden)"); }
ParamSpec seq_len(double value, double max = 8192) { return integer("seq_len", value, 1, max, "sequence length"); }
ParamSpec vocab(double value) { return integer("vocab", value, 2, 2000000, "vocabulary size"); }
ParamSpec image_size(double value, double min) {
  return integer("image_size", value, min, 2048, "height and width of the input images");
}
ParamSpec classes(double value) { return integer("classes", value, 1, 1000000, "output classes"); }
// Today's transformers: long contexts, deep stacks (1M-op graphs for scaling studies), experts and shards.
constexpr double kMaxContext = 131072, kMaxLayers = 16384;
ParamSpec ffn(double value) {
  return integer("ffn", value, 0, 1 << 20, "units of the feed-forward layer (0: 4 x hidden)");
}
ParamSpec kv_heads(double value) {
  return integer("kv_heads", value, 0, 256,
                 "key/value heads (grouped-query attention; must divide heads; 0: as many as heads)");
}
ParamSpec experts(double value) {
  return integer("experts", value, 0, 4096, "experts of a mixture-of-experts feed-forward (0: dense)");
}
ParamSpec top_k(double value) { return integer("top_k", value, 1, 64, "experts each token is routed to"); }
ParamSpec moe_every() {
  return integer("moe_every", 1, 1, 1024, "every this many layers has experts, the others are dense (Switch: 2)");
}
ParamSpec shards() {
  return integer("shards", 1, 1, 256, "tensor-parallel shards of each attention and dense feed-forward sublayer");
}
ParamSpec micro_batches() {
  return integer("micro_batches", 1, 1, 4096,
                 "copies of the model, each on batch / micro_batches examples, sharing the weights (pipelining)");
}
ParamSpec flash(double value) {
  return integer("flash", value, 0, 1, "1: attention as one fused op that never holds the T x T scores");
}
ParamSpec cells(double value) { return integer("cells", value, 1, 32, "normal cells per stage (N)"); }
ParamSpec filters(double value) { return integer("filters", value, 4, 4096, "filters of the first stage's cells (F)"); }
ParamSpec stem_filters(double value) {
  return integer("stem_filters", value, 4, 4096, "filters of the stem convolution");
}

const std::vector<Generator>& generators() {
  static const std::vector<Generator> all = {
      {"inception_v3",
       "Inception-v3 (Szegedy et al. 2016), without the auxiliary head",
       {batch(32), image_size(299, 75), classes(1000)},
       build_inception_v3},
      {"resnet50",
       "ResNet-50 v1.5 (He et al. 2016; stride on the 3x3 convolution, as torchvision)",
       {batch(32), image_size(224, 32), classes(1000)},
       build_resnet50},
      {"bert",
       "BERT encoder (Devlin et al. 2019) with pooler; defaults are BERT-base",
       {batch(32), seq_len(128, 512), layers(12, 128, "transformer layers"), hidden(768), heads(12), vocab(30522)},
       build_bert},
      {"transformer_xl",
       "Transformer-XL (Dai et al. 2019), one segment with memory; defaults are the WikiText-103 base model",
       {batch(60), seq_len(150), integer("mem_len", 150, 0, 8192, "length of the cached memory of each layer"),
        layers(16, 128, "transformer layers"), hidden(410), heads(10),
        integer("inner", 2100, 4, 65536, "units of the feed-forward layer"), vocab(267735)},
       build_transformer_xl},
      {"gnmt",
       "GNMT (Wu et al. 2016): bidirectional bottom encoder layer, residual LSTM stacks, attention, softmax; unrolled",
       {batch(128), layers(8, 16, "LSTM layers of the encoder and of the decoder"), steps(100), hidden(1024),
        vocab(32000),
        // 8: one slice per GPU of GNMT's 8-GPU model replica, over which it partitions its softmax (Wu et al.
        // 2016, section 3, figure 1); 1 is the single softmax of the other recurrent models.
        integer("shards", 8, 1, 1024, "vocabulary slices of the output softmax, one MatMul + Softmax each")},
       build_gnmt},
      {"rnnlm",
       "LSTM language model (as in GDP), unrolled, with a softmax per step",
       {batch(64), layers(2, 16, "LSTM layers"), steps(40), hidden(2048), vocab(32000)},
       build_rnnlm},
      {"wavenet",
       "WaveNet (van den Oord et al. 2016): stacks of dilated causal convolutions with gated activations",
       {batch(4), seq_len(16000, 1000000), layers(30, 256, "residual layers (dilations cycle 1, 2, ..., 512)"),
        integer("channels", 64, 1, 4096, "residual and dilation channels"),
        integer("skip_channels", 256, 1, 4096, "skip-connection channels"), classes(256)},
       build_wavenet},
      {"amoebanet",
       "AmoebaNet-A (Real et al. 2019), ImageNet model, without the auxiliary head",
       {batch(32), cells(6), filters(190), stem_filters(96), image_size(331, 64), classes(1000)},
       build_amoebanet},
      {"nasnet",
       "NASNet-A (Zoph et al. 2018), ImageNet model, without the auxiliary head; defaults are NASNet-A Large",
       {batch(32), cells(6), filters(168), stem_filters(96), image_size(331, 64), classes(1000)},
       build_nasnet},
      {"cifar10",
       "ENAS-like random convolutional cells (Pham et al. 2018 micro search space) on CIFAR-10, seeded",
       {seed(), batch(128), cells(5), integer("nodes", 5, 2, 12, "nodes per cell (B)"), filters(36), image_size(32, 8),
        classes(10)},
       build_cifar10},
      {"ptb",
       "ENAS-like random recurrent cells (Pham et al. 2018) on Penn Treebank, unrolled, seeded",
       {seed(), batch(64), integer("nodes", 12, 2, 32, "nodes per recurrent cell"), steps(35), hidden(1000),
        vocab(10000)},
       build_ptb},
      {"nmt",
       "NMT variants (Placeto's family): layers, steps, hidden size and attention chosen by the seed",
       {seed(), batch(64), vocab(32000)},
       build_nmt},
      {"gpt",
       "GPT decoder (Radford et al. 2019; Brown et al. 2020): pre-norm, GELU MLP, learned positions, LM head tied "
       "to the token embedding; optional mixture-of-experts layers (Switch); defaults are GPT-2 small",
       {batch(1), seq_len(1024, kMaxContext), layers(12, kMaxLayers, "decoder layers"), hidden(768), heads(12),
        ffn(0), vocab(50257), experts(0), top_k(1), moe_every(), shards(), micro_batches(), flash(0)},
       build_gpt},
      {"llama",
       "Llama decoder (Touvron et al. 2023): RMSNorm, SwiGLU, rotary positions, grouped-query attention, untied "
       "head; optional mixture-of-experts layers; defaults are Llama-2-7B",
       {batch(1), seq_len(4096, kMaxContext), layers(32, kMaxLayers, "decoder layers"), hidden(4096), heads(32),
        kv_heads(0), ffn(11008), vocab(32000), experts(0), top_k(2), moe_every(), shards(), micro_batches(), flash(1)},
       build_llama},
      {"mixtral",
       "Mixtral (Jiang et al. 2024): the Llama decoder with a mixture of SwiGLU experts in every layer; defaults "
       "are Mixtral 8x7B",
       {batch(1), seq_len(4096, kMaxContext), layers(32, kMaxLayers, "decoder layers"), hidden(4096), heads(32),
        kv_heads(8), ffn(14336), vocab(32000), experts(8), top_k(2), moe_every(), shards(), micro_batches(), flash(1)},
       build_llama},
      {"vit",
       "Vision Transformer (Dosovitskiy et al. 2021) classifier; defaults are ViT-B/16 at 224x224",
       {batch(1), image_size(224, 16), integer("patch", 16, 1, 1024, "patch size in pixels (must divide image_size)"),
        layers(12, kMaxLayers, "encoder layers"), hidden(768), heads(12), ffn(3072), classes(1000), shards(),
        micro_batches()},
       build_vit},
      {"random_dag",
       "Seeded layered random DAG with log-uniform costs",
       {seed(), integer("ops", 1000, 1, 1000000, "ops"), integer("width", 16, 1, 100000, "ops per layer"),
        integer("fan_in", 3, 1, 64, "most inputs of an op"),
        integer("max_skip", 3, 1, 100000, "an op reads ops at most this many layers back"),
        real("min_flops", 1e6, 0, 1e18, "least FLOPs of an op"),
        real("max_flops", 1e10, 0, 1e18, "most FLOPs of an op"),
        real("min_bytes", 1e4, 0, 1e15, "least output (and parameter) bytes of an op"),
        real("max_bytes", 1e7, 0, 1e15, "most output (and parameter) bytes of an op"),
        real("param_prob", 0.3, 0, 1, "probability that an op has parameters")},
       build_random_dag},
  };
  return all;
}

std::string known_names() {
  std::string names;
  for (const Generator& g : generators()) names += (names.empty() ? "" : ", ") + g.name;
  return names;
}

const Generator& find_generator(std::string_view name) {
  for (const Generator& g : generators())
    if (g.name == name) return g;
  throw Error(fmt::format("unknown model \"{}\" (known models: {})", name, known_names()));
}

std::string range_text(const ParamSpec& p) {
  return fmt::format("{} in [{}, {}]", p.integer ? "an integer" : "a number", p.min, p.max);
}

}  // namespace

double Args::real(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end())
    throw std::logic_error(fmt::format("zoo: model \"{}\" reads undeclared param \"{}\"", model_, name));
  return it->second;
}

void Args::fail(std::string_view message) const { throw Error(fmt::format("model \"{}\": {}", model_, message)); }

int64_t Rng::uniform_int(int64_t lo, int64_t hi) {
  const auto span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(engine_());  // the whole 64-bit range
  // Rejection sampling keeps every value equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % span;
  uint64_t r;
  do r = engine_();
  while (r >= limit);
  return lo + static_cast<int64_t>(r % span);
}

double Rng::log_uniform(double lo, double hi) {
  if (lo <= 0) return lo + (hi - lo) * uniform();
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * uniform());
}

const std::vector<ModelInfo>& models() {
  static const std::vector<ModelInfo> infos = [] {
    std::vector<ModelInfo> out;
    for (const Generator& g : generators()) {
      ModelInfo info{g.name, g.summary, {}};
      for (const ParamSpec& p : g.params)
        info.params.push_back({p.name, p.value, fmt::format("{} ({})", p.help, range_text(p))});
      out.push_back(std::move(info));
    }
    return out;
  }();
  return infos;
}

const ModelInfo& model_info(std::string_view name) {
  const Generator& g = find_generator(name);
  return models()[static_cast<size_t>(&g - generators().data())];
}

Graph make_model(std::string_view name, const Params& params) {
  const Generator& gen = find_generator(name);
  Params values;
  for (const ParamSpec& p : gen.params) values.emplace(p.name, p.value);
  for (const auto& [key, value] : params) {
    const std::string& given = key;  // Clang before 16 cannot capture a structured binding in a lambda
    auto spec = std::find_if(gen.params.begin(), gen.params.end(), [&](const ParamSpec& p) { return p.name == given; });
    if (spec == gen.params.end()) {
      std::string known;
      for (const ParamSpec& p : gen.params) known += (known.empty() ? "" : ", ") + p.name;
      throw Error(fmt::format("model \"{}\": unknown param \"{}\" (known params: {})", gen.name, key, known));
    }
    const bool in_range = std::isfinite(value) && value >= spec->min && value <= spec->max;
    if (!in_range || (spec->integer && value != std::floor(value)))
      throw Error(
          fmt::format("model \"{}\": param \"{}\" is {} (must be {})", gen.name, key, value, range_text(*spec)));
    values[key] = value;
  }
  return gen.build(Args(gen.name, std::move(values)));
}

}  // namespace placelab::graphs::zoo
