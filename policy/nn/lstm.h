// Recurrent layers of HDP's placer: an LSTM cell (PyTorch's gate order and two biases) and an
// attentional LSTM decoder that emits one device distribution per group while attending over the
// encoder's group embeddings (Bahdanau-style additive attention).
// Legend: n = batch rows, i = input features, k = hidden size, G = groups, e = encoder width,
// D = devices, a = attention width.
#pragma once

#include "policy/nn/linear.h"

namespace placelab::nn {

/** Hidden and cell state, each [n, k]. */
template <class T>
struct LstmState {
  TensorT<T> h, c;
};

/** gates = x W_ih + b_ih + h W_hh + b_hh, split i, f, g, o; c' = f c + i g; h' = o tanh(c'). */
template <class T>
class LstmCellT {
 public:
  LstmCellT() = default;
  /** PyTorch init: everything uniform in +-1/sqrt(hidden). */
  LstmCellT(Index in, Index hidden, std::mt19937_64& rng);
  /** x[n,i] and state -> new state. */
  LstmState<T> forward(const TensorT<T>& x, const LstmState<T>& state) const;
  /** Zero state for n rows. */
  LstmState<T> zero_state(Index rows) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;
  Index hidden() const { return hidden_; }
  LinearT<T>& input() { return input_; }
  LinearT<T>& recurrent() { return recurrent_; }

 private:
  Index hidden_ = 0;
  LinearT<T> input_, recurrent_;  // i -> 4k and k -> 4k, both with bias
};

/**
 * HDP's placer decoder. Step t embeds the previous device (token 0 = start, device d -> d + 1), runs
 * the LSTM on [embedding; previous context], attends over encoder rows with
 * score_g = v^T tanh(W_enc enc_g + W_dec h_t), and outputs logits over D devices from [h_t; context_t].
 */
template <class T>
class AttentionalLstmDecoderT {
 public:
  AttentionalLstmDecoderT() = default;
  AttentionalLstmDecoderT(Index encoder_dim, Index hidden, Index devices, Index embed_dim, Index attention_dim,
                          std::mt19937_64& rng);

  /** Decoder state between steps. */
  struct State {
    LstmState<T> lstm;
    TensorT<T> context;  // [1, e]
  };
  /** Start state for encoder outputs enc[G, e]. */
  State start(const TensorT<T>& encoder) const;
  /** One step: previous device (-1 at the start) -> logits [1, D]; advances `state`. enc_proj is
   *  project_encoder(encoder), computed once per sequence. */
  TensorT<T> step(const TensorT<T>& encoder, const TensorT<T>& enc_proj, int32_t previous_device, State& state) const;
  /** W_enc enc [G, a], shared by all steps. */
  TensorT<T> project_encoder(const TensorT<T>& encoder) const;
  /** Teacher-forced decoding of `devices` (one per encoder row) -> logits [G, D]. */
  TensorT<T> forward(const TensorT<T>& encoder, const std::vector<int32_t>& devices) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;
  Index devices() const { return devices_; }

 private:
  Index devices_ = 0;
  EmbeddingT<T> embed_;
  LstmCellT<T> cell_;
  LinearT<T> att_enc_, att_dec_, att_v_, out_;
};

using LstmCell = LstmCellT<float>;
using AttentionalLstmDecoder = AttentionalLstmDecoderT<float>;

}  // namespace placelab::nn
