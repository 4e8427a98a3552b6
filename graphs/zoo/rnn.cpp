// Recurrent models of the zoo, unrolled over time as in GDP and HDP: GNMT, the NMT variants (one
// sequence-to-sequence builder), the LSTM language model RNNLM, and ENAS-like random recurrent cells
// ("ptb"). Weights are Variable ops read by every step, so parameter bytes are counted once.
// Layer (block) indices: LSTM layer l is block l (embeddings join layer 0); attention and the
// softmax are block `layers`, past the last LSTM layer, where expert placements put them.
#include <limits>
#include <optional>

#include "graphs/zoo/families.h"
#include "graphs/zoo/net_builder.h"

namespace placelab::graphs::zoo {

namespace {

// B = batch, T = time steps, E = embedding width, H = hidden units, V = vocabulary.

/** An LSTM layer being unrolled: its shared weights and its current state. */
struct LstmLayer {
  LstmWeights weights;
  LstmState state;
};

/** Creates weights and a zero initial state in the current scope. */
LstmLayer make_lstm_layer(NetBuilder& b, int64_t batch, int64_t input, int64_t hidden) {
  LstmWeights weights = b.lstm_weights(input, hidden);
  Tensor zero = b.constant("initial_state", {batch, hidden});
  return {std::move(weights), {zero, zero}};
}

/** One time step of `layer` on the concatenation of `inputs`; returns h. */
Tensor lstm_step(NetBuilder& b, LstmLayer& layer, std::initializer_list<Tensor> inputs) {
  layer.state = b.lstm_cell(std::span<const Tensor>(inputs.begin(), inputs.size()), layer.state, layer.weights);
  return layer.state.h;
}

/** Token ids [B, T] -> one Embedding op [B, T, E] -> per-step views [B, E]. */
std::vector<Tensor> embed_steps(NetBuilder& b, std::string_view name, int64_t batch, int64_t steps, int64_t vocab,
                                int64_t width) {
  auto s = b.scope(name);
  Tensor embedded = b.embedding(b.input("ids", {batch, steps}), vocab, width);
  return std::vector<Tensor>(static_cast<size_t>(steps), NetBuilder::view(embedded, {batch, width}));
}

/**
 * The output layer: shared weights [H, V] and bias, then MatMul, BiasAdd and Softmax per step. With
 * `shards` > 1 the vocabulary is split into that many near-equal slices, as GNMT partitions its softmax
 * over GPUs (Wu et al. 2016, section 3 and figure 1): slice k has its own weights and, per step, its own
 * MatMul, BiasAdd and Softmax under softmax/shard<k>/ (the shard's local softmax; its log-sum-exp [B, 1]
 * goes on), and one SoftmaxCombine per step forms the global log-normaliser from the K log-sum-exps, by
 * which the loss rescales each slice (as a vocabulary-parallel cross-entropy does). FLOPs and bytes are
 * the unsharded layer's plus the combine's 5 FLOPs per read value and its [B, 1] output.
 */
class SoftmaxLayer {
 public:
  SoftmaxLayer(NetBuilder& b, int64_t hidden, int64_t vocab, int64_t shards = 1) {
    for (int64_t k = 0; k < shards; ++k) {
      const int64_t width = vocab / shards + (k < vocab % shards ? 1 : 0);
      auto s = b.scope(shards == 1 ? "softmax" : fmt::format("softmax/shard{}", k));
      shards_.push_back({b.variable("kernel", {hidden, width}), b.variable("bias", {width})});
    }
  }

  void operator()(NetBuilder& b, const Tensor& h, int64_t step) const {
    const int64_t shards = static_cast<int64_t>(shards_.size());
    if (shards == 1) {
      auto s = b.scope("softmax/step{}", step);
      shard_softmax(b, h, shards_[0]);
      return;
    }
    std::vector<Tensor> log_sum_exps;
    for (int64_t k = 0; k < shards; ++k) {
      auto s = b.scope("softmax/shard{}/step{}", k, step);
      log_sum_exps.push_back(NetBuilder::view(shard_softmax(b, h, shards_[static_cast<size_t>(k)]), {h.dim(0), 1}));
    }
    auto s = b.scope("softmax/step{}", step);
    b.op({.type = "SoftmaxCombine", .out = {h.dim(0), 1}, .flops = cost::kSoftmax * static_cast<double>(h.dim(0) * shards)},
         log_sum_exps);
  }

 private:
  struct Shard {
    Tensor kernel, bias;
  };

  /** logits = h [B, H] x kernel [H, V_k] + bias, then Softmax over the V_k columns. */
  static Tensor shard_softmax(NetBuilder& b, const Tensor& h, const Shard& w) {
    Tensor logits = b.matmul(h, w.kernel);
    logits = b.op({.type = "BiasAdd", .out = logits.shape, .flops = static_cast<double>(logits.elements())},
                  {logits, w.bias});
    return b.softmax(logits);
  }

  std::vector<Shard> shards_;
};

/** Runs one LSTM layer over all steps (in reverse when `reverse`); outputs by position. */
std::vector<Tensor> run_layer(NetBuilder& b, std::string_view name, const std::vector<Tensor>& xs, int64_t hidden,
                              bool reverse) {
  auto s = b.scope(name);
  const auto steps = static_cast<int64_t>(xs.size());
  LstmLayer layer = make_lstm_layer(b, xs.front().dim(0), xs.front().dim(-1), hidden);
  std::vector<Tensor> out(xs.size());
  for (int64_t i = 0; i < steps; ++i) {
    const auto t = static_cast<size_t>(reverse ? steps - 1 - i : i);
    auto step_scope = b.scope("step{}", t);
    out[t] = lstm_step(b, layer, {xs[t]});
  }
  return out;
}

struct Seq2Seq {
  int32_t layers;
  int64_t steps, hidden, vocab, batch;
  bool bidirectional;     // the bottom encoder layer reads the source both ways (GNMT)
  int32_t residual_from;  // layers >= this add their input to their output
  bool attention;         // additive attention over the encoder outputs, fed to every decoder layer
  int64_t softmax_shards = 1;  // vocabulary slices of the output softmax (SoftmaxLayer)
};

/** Bahdanau-style attention of a decoder state over the encoder outputs (GNMT's, simplified). */
class Attention {
 public:
  Attention(NetBuilder& b, const std::vector<Tensor>& encoder_outputs, int64_t hidden) {
    memory_ = b.in_scope("encoder", [&] { return b.stack(encoder_outputs); });
    auto s = b.scope("decoder/attention");
    keys_ = b.in_scope("memory_layer", [&] { return b.matmul(memory_, hidden); });
    query_kernel_ = b.variable("query_kernel", {hidden, hidden});
    v_ = b.variable("v", {hidden, 1});
    initial_context_ = b.constant("initial_context", {memory_.dim(0), memory_.dim(-1)});
  }

  const Tensor& initial_context() const { return initial_context_; }
  int64_t context_width() const { return memory_.dim(-1); }

  /** The context vector [B, memory width] for decoder state h [B, H]. */
  Tensor operator()(NetBuilder& b, const Tensor& h, int64_t step) const {
    auto s = b.scope("decoder/attention/step{}", step);
    const int64_t batch = memory_.dim(0), steps = memory_.dim(1);
    Tensor query = b.matmul(h, query_kernel_);
    Tensor energy = b.tanh(b.add(keys_, query));  // [B, T, H]
    Tensor alignments = b.softmax(NetBuilder::view(b.matmul(energy, v_), {batch, 1, steps}));
    Tensor context = b.batch_matmul(alignments, memory_);  // [B, 1, width]
    return NetBuilder::view(context, {batch, context.dim(-1)});
  }

 private:
  Tensor memory_, keys_, query_kernel_, v_, initial_context_;
};

Graph build_seq2seq(std::string name, const Seq2Seq& m) {
  NetBuilder b(std::move(name));
  const int32_t head = m.layers;

  // Encoder, layer by layer.
  b.set_layer(0);
  std::vector<Tensor> xs = embed_steps(b, "encoder/embedding", m.batch, m.steps, m.vocab, m.hidden);
  for (int32_t l = 0; l < m.layers; ++l) {
    b.set_layer(l);
    const std::string layer_name = fmt::format("encoder/layer{}", l);
    std::vector<Tensor> out;
    if (l == 0 && m.bidirectional) {
      std::vector<Tensor> fw = run_layer(b, layer_name + "/fw", xs, m.hidden, false);
      std::vector<Tensor> bw = run_layer(b, layer_name + "/bw", xs, m.hidden, true);
      for (size_t t = 0; t < xs.size(); ++t)
        out.push_back(b.in_scope(fmt::format("{}/step{}", layer_name, t), [&] { return b.concat({fw[t], bw[t]}); }));
    } else {
      out = run_layer(b, layer_name, xs, m.hidden, false);
      if (l >= m.residual_from) {
        for (size_t t = 0; t < xs.size(); ++t)
          out[t] = b.in_scope(fmt::format("{}/step{}/residual", layer_name, t), [&] { return b.add(out[t], xs[t]); });
      }
    }
    xs = std::move(out);
  }

  // Decoder, step by step: the bottom layer reads the previous step's context, the others the new one.
  b.set_layer(0);
  std::vector<Tensor> targets = embed_steps(b, "decoder/embedding", m.batch, m.steps, m.vocab, m.hidden);
  b.set_layer(head);
  std::optional<Attention> attention;
  if (m.attention) attention.emplace(b, xs, m.hidden);
  const int64_t context_width = attention ? attention->context_width() : 0;
  std::vector<LstmLayer> decoder;
  for (int32_t l = 0; l < m.layers; ++l) {
    b.set_layer(l);
    auto s = b.scope("decoder/layer{}", l);
    decoder.push_back(make_lstm_layer(b, m.batch, m.hidden + context_width, m.hidden));
  }
  b.set_layer(head);
  SoftmaxLayer softmax(b, m.hidden, m.vocab, m.softmax_shards);
  Tensor context = attention ? attention->initial_context() : Tensor{};
  for (int64_t t = 0; t < m.steps; ++t) {
    Tensor x = targets[static_cast<size_t>(t)];
    for (int32_t l = 0; l < m.layers; ++l) {
      b.set_layer(l);
      x = b.in_scope(fmt::format("decoder/layer{}/step{}", l, t), [&] {
        Tensor h = attention ? lstm_step(b, decoder[l], {x, context}) : lstm_step(b, decoder[l], {x});
        return l >= m.residual_from ? b.in_scope("residual", [&] { return b.add(h, x); }) : h;
      });
      if (l == 0 && attention) {
        b.set_layer(head);
        context = (*attention)(b, x, t);
      }
    }
    b.set_layer(head);
    softmax(b, x, t);
  }
  return std::move(b).build();
}

}  // namespace

Graph build_gnmt(const Args& args) {
  if (args.integer("shards") > args.integer("vocab"))
    args.fail(fmt::format("shards ({}) exceeds vocab ({})", args.integer("shards"), args.integer("vocab")));
  return build_seq2seq("gnmt", {.layers = args.int32("layers"),
                                .steps = args.integer("steps"),
                                .hidden = args.integer("hidden"),
                                .vocab = args.integer("vocab"),
                                .batch = args.integer("batch"),
                                .bidirectional = true,
                                .residual_from = 2,
                                .attention = true,
                                .softmax_shards = args.integer("shards")});
}

Graph build_nmt(const Args& args) {
  Rng rng(static_cast<uint64_t>(args.integer("seed")));
  Seq2Seq m{.layers = static_cast<int32_t>(rng.uniform_int(1, 4)),
            .steps = rng.uniform_int(10, 50),
            .hidden = rng.pick(std::vector<int64_t>{256, 512, 1024}),
            .vocab = args.integer("vocab"),
            .batch = args.integer("batch"),
            .bidirectional = rng.uniform() < 0.5,
            .residual_from = std::numeric_limits<int32_t>::max(),
            .attention = rng.uniform() < 0.5};
  if (rng.uniform() < 0.5) m.residual_from = 2;  // residual past the (possibly bidirectional) bottom layer
  return build_seq2seq(fmt::format("nmt_l{}_t{}_h{}{}{}{}", m.layers, m.steps, m.hidden, m.bidirectional ? "_bi" : "",
                                   m.residual_from < m.layers ? "_res" : "", m.attention ? "_att" : ""),
                       m);
}

Graph build_rnnlm(const Args& args) {
  NetBuilder b("rnnlm");
  const int32_t layers = args.int32("layers");
  const int64_t batch = args.integer("batch"), steps = args.integer("steps"), hidden = args.integer("hidden");
  const int64_t vocab = args.integer("vocab");
  b.set_layer(0);
  std::vector<Tensor> xs = embed_steps(b, "embedding", batch, steps, vocab, hidden);
  for (int32_t l = 0; l < layers; ++l) {
    b.set_layer(l);
    xs = run_layer(b, fmt::format("layer{}", l), xs, hidden, false);
  }
  b.set_layer(layers);
  SoftmaxLayer softmax(b, hidden, vocab);
  for (size_t t = 0; t < xs.size(); ++t) softmax(b, xs[t], static_cast<int64_t>(t));
  return std::move(b).build();
}

namespace {

/**
 * An ENAS recurrent cell (Pham et al. 2018): node 0 reads x_t and h_{t-1}, node i > 0 reads one
 * earlier node j; each computes c = sigmoid(W_c s), h = c * act(W_h s) + (1 - c) * s_prev (a
 * highway), and the cell outputs the mean of the nodes no other node reads.
 */
struct EnasRnnCell {
  std::vector<int> input;                    // per node i > 0: the node it reads
  std::vector<std::string_view> activation;  // per node: "Tanh", "Relu", "Sigmoid" or "" (identity)
};

EnasRnnCell random_enas_rnn_cell(Rng& rng, int nodes) {
  static const std::vector<std::string_view> kActivations = {"Tanh", "Relu", "Sigmoid", ""};
  EnasRnnCell cell;
  cell.input.push_back(-1);
  for (int i = 0; i < nodes; ++i) {
    if (i > 0) cell.input.push_back(static_cast<int>(rng.uniform_int(0, i - 1)));
    cell.activation.push_back(rng.pick(kActivations));
  }
  return cell;
}

/** c * candidate + (1 - c) * base, for the gate and candidate in the two halves of z. */
Tensor highway(NetBuilder& b, const Tensor& z, std::string_view activation, const Tensor& base) {
  std::vector<Tensor> halves = b.split(z, 2);
  Tensor c = b.sigmoid(halves[0]);
  Tensor candidate = activation.empty() ? halves[1] : b.unary(activation, halves[1], cost::kElementwise);
  Tensor kept = b.mul(c, candidate);
  Tensor carried = b.mul(b.unary("Sub", c, cost::kElementwise), base);  // (1 - c) * base
  return b.add(kept, carried);
}

}  // namespace

Graph build_ptb(const Args& args) {
  Rng rng(static_cast<uint64_t>(args.integer("seed")));
  const int nodes = args.int32("nodes");
  const EnasRnnCell cell = random_enas_rnn_cell(rng, nodes);
  const int64_t batch = args.integer("batch"), steps = args.integer("steps"), hidden = args.integer("hidden");
  const int64_t vocab = args.integer("vocab");

  NetBuilder b("ptb");
  b.set_layer(0);
  std::vector<Tensor> xs = embed_steps(b, "embedding", batch, steps, vocab, hidden);
  std::vector<Tensor> weights;
  std::vector<bool> read(static_cast<size_t>(nodes), false);
  {
    auto s = b.scope("cell");
    for (int i = 0; i < nodes; ++i) {
      weights.push_back(b.variable(fmt::format("node{}/kernel", i), {(i == 0 ? 2 : 1) * hidden, 2 * hidden}));
      if (i > 0) read[static_cast<size_t>(cell.input[static_cast<size_t>(i)])] = true;
    }
  }
  Tensor h = b.constant("initial_state", {batch, hidden});
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < steps; ++t) {
    auto s = b.scope("cell/step{}", t);
    std::vector<Tensor> node(static_cast<size_t>(nodes));
    std::vector<Tensor> loose_ends;
    for (size_t i = 0; i < node.size(); ++i) {
      auto ns = b.scope("node{}", i);
      if (i == 0) {
        Tensor z = b.matmul(b.concat({xs[static_cast<size_t>(t)], h}), weights[0]);
        node[0] = highway(b, z, cell.activation[0], h);
      } else {
        const Tensor& from = node[static_cast<size_t>(cell.input[i])];
        node[i] = highway(b, b.matmul(from, weights[i]), cell.activation[i], from);
      }
      if (!read[i]) loose_ends.push_back(node[i]);
    }
    h = b.op({.type = "Mean",
              .out = {batch, hidden},
              .flops = static_cast<double>(batch * hidden * static_cast<int64_t>(loose_ends.size()))},
             loose_ends);
    outputs.push_back(h);
  }
  b.set_layer(1);
  SoftmaxLayer softmax(b, hidden, vocab);
  for (size_t t = 0; t < outputs.size(); ++t) softmax(b, outputs[t], static_cast<int64_t>(t));
  return std::move(b).build();
}

}  // namespace placelab::graphs::zoo
