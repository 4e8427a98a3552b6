// Convolutional models of the zoo: ResNet-50, Inception-v3 and WaveNet.
// Layer (block) indices: the stem is block 0, each residual / mixed block the next, the head the last.
#include <array>

#include "graphs/zoo/families.h"
#include "graphs/zoo/net_builder.h"

namespace placelab::graphs::zoo {

namespace {

// N = batch, H/W = spatial size, C = channels (NHWC throughout).

/** One convolution of a chain: conv2d + BatchNorm + Relu. */
struct ConvSpec {
  int64_t filters, kernel_h, kernel_w;
  int64_t stride = 1;
  Padding padding = Padding::same;
};

/** conv-bn-relu layers applied in order, named "<name>/conv<i>/...". */
Tensor conv_chain(NetBuilder& b, std::string_view name, Tensor x, std::initializer_list<ConvSpec> convs,
                  int first = 1) {
  auto s = b.scope(name);
  int i = first - 1;
  for (const ConvSpec& c : convs) {
    auto conv_scope = b.scope("conv{}", ++i);
    x = b.conv_bn_relu(x, c.filters, c.kernel_h, c.kernel_w, c.stride, c.padding);
  }
  return x;
}

/** ResNet v1.5 bottleneck: 1x1 (width), 3x3 (width, stride), 1x1 (4 width), projection shortcut when shapes change. */
Tensor bottleneck(NetBuilder& b, const Tensor& x, int64_t width, int64_t stride) {
  Tensor shortcut = x;
  if (stride != 1 || x.dim(-1) != 4 * width)
    shortcut = b.in_scope("shortcut", [&] { return b.batch_norm(b.conv2d(x, 4 * width, 1, 1, stride)); });
  Tensor y = b.in_scope("conv1", [&] { return b.conv_bn_relu(x, width, 1, 1); });
  y = b.in_scope("conv2", [&] { return b.conv_bn_relu(y, width, 3, 3, stride); });
  y = b.in_scope("conv3", [&] { return b.batch_norm(b.conv2d(y, 4 * width, 1, 1)); });
  return b.relu(b.add(y, shortcut));
}

}  // namespace

Graph build_resnet50(const Args& args) {
  NetBuilder b("resnet50");
  const int64_t size = args.integer("image_size");
  b.set_layer(0);
  Tensor x = b.input("images", {args.integer("batch"), size, size, 3});
  x = b.in_scope("stem", [&] { return b.max_pool(b.conv_bn_relu(x, 64, 7, 7, 2), 3, 2); });
  constexpr std::array<int, 4> kBlocks = {3, 4, 6, 3};
  int32_t layer = 0;
  for (int stage = 0; stage < 4; ++stage) {
    for (int i = 0; i < kBlocks[stage]; ++i) {
      b.set_layer(++layer);
      auto s = b.scope("stage{}/block{}", stage + 1, i + 1);
      x = bottleneck(b, x, int64_t{64} << stage, stage > 0 && i == 0 ? 2 : 1);
    }
  }
  b.set_layer(++layer);
  b.in_scope("head", [&] { return b.classifier(x, args.integer("classes")); });
  return std::move(b).build();
}

namespace {

constexpr Padding kValid = Padding::valid;

// The five kinds of Inception-v3 blocks (Szegedy et al. 2016, figures 5-7 and 10), as in Keras.

Tensor inception_a(NetBuilder& b, const Tensor& x, int64_t pool_filters) {  // 35x35
  std::array<Tensor, 4> branches = {
      conv_chain(b, "branch1x1", x, {{64, 1, 1}}),
      conv_chain(b, "branch5x5", x, {{48, 1, 1}, {64, 5, 5}}),
      conv_chain(b, "branch3x3dbl", x, {{64, 1, 1}, {96, 3, 3}, {96, 3, 3}}),
      conv_chain(b, "branch_pool", b.avg_pool(x, 3, 1), {{pool_filters, 1, 1}}),
  };
  return b.concat(branches);
}

Tensor reduction_a(NetBuilder& b, const Tensor& x) {  // 35x35 -> 17x17
  std::array<Tensor, 3> branches = {
      conv_chain(b, "branch3x3", x, {{384, 3, 3, 2, kValid}}),
      conv_chain(b, "branch3x3dbl", x, {{64, 1, 1}, {96, 3, 3}, {96, 3, 3, 2, kValid}}),
      b.max_pool(x, 3, 2, kValid),
  };
  return b.concat(branches);
}

Tensor inception_c(NetBuilder& b, const Tensor& x, int64_t c7) {  // 17x17, factorised 7x7
  std::array<Tensor, 4> branches = {
      conv_chain(b, "branch1x1", x, {{192, 1, 1}}),
      conv_chain(b, "branch7x7", x, {{c7, 1, 1}, {c7, 1, 7}, {192, 7, 1}}),
      conv_chain(b, "branch7x7dbl", x, {{c7, 1, 1}, {c7, 7, 1}, {c7, 1, 7}, {c7, 7, 1}, {192, 1, 7}}),
      conv_chain(b, "branch_pool", b.avg_pool(x, 3, 1), {{192, 1, 1}}),
  };
  return b.concat(branches);
}

Tensor reduction_b(NetBuilder& b, const Tensor& x) {  // 17x17 -> 8x8
  std::array<Tensor, 3> branches = {
      conv_chain(b, "branch3x3", x, {{192, 1, 1}, {320, 3, 3, 2, kValid}}),
      conv_chain(b, "branch7x7x3", x, {{192, 1, 1}, {192, 1, 7}, {192, 7, 1}, {192, 3, 3, 2, kValid}}),
      b.max_pool(x, 3, 2, kValid),
  };
  return b.concat(branches);
}

/** A 1x3 and a 3x1 convolution of the same input, concatenated (the expanded 8x8 blocks). */
Tensor split_1x3_3x1(NetBuilder& b, std::string_view name, const Tensor& x) {
  auto s = b.scope(name);
  return b.concat({conv_chain(b, "1x3", x, {{384, 1, 3}}), conv_chain(b, "3x1", x, {{384, 3, 1}})});
}

Tensor inception_e(NetBuilder& b, const Tensor& x) {  // 8x8, expanded filter banks
  std::array<Tensor, 4> branches = {
      conv_chain(b, "branch1x1", x, {{320, 1, 1}}),
      split_1x3_3x1(b, "branch3x3", conv_chain(b, "branch3x3", x, {{384, 1, 1}})),
      split_1x3_3x1(b, "branch3x3dbl", conv_chain(b, "branch3x3dbl", x, {{448, 1, 1}, {384, 3, 3}})),
      conv_chain(b, "branch_pool", b.avg_pool(x, 3, 1), {{192, 1, 1}}),
  };
  return b.concat(branches);
}

}  // namespace

Graph build_inception_v3(const Args& args) {
  NetBuilder b("inception_v3");
  const int64_t size = args.integer("image_size");
  b.set_layer(0);
  Tensor x = b.input("images", {args.integer("batch"), size, size, 3});
  auto stem_pool = [&](const Tensor& t) { return b.in_scope("stem", [&] { return b.max_pool(t, 3, 2, kValid); }); };
  x = stem_pool(conv_chain(b, "stem", x, {{32, 3, 3, 2, kValid}, {32, 3, 3, 1, kValid}, {64, 3, 3}}));
  x = stem_pool(conv_chain(b, "stem", x, {{80, 1, 1, 1, kValid}, {192, 3, 3, 1, kValid}}, 4));
  int32_t layer = 0;
  auto block = [&](std::string_view name, auto&& body) {
    b.set_layer(++layer);
    x = b.in_scope(name, [&] { return body(x); });
  };
  block("mixed_5b", [&](const Tensor& t) { return inception_a(b, t, 32); });
  block("mixed_5c", [&](const Tensor& t) { return inception_a(b, t, 64); });
  block("mixed_5d", [&](const Tensor& t) { return inception_a(b, t, 64); });
  block("mixed_6a", [&](const Tensor& t) { return reduction_a(b, t); });
  block("mixed_6b", [&](const Tensor& t) { return inception_c(b, t, 128); });
  block("mixed_6c", [&](const Tensor& t) { return inception_c(b, t, 160); });
  block("mixed_6d", [&](const Tensor& t) { return inception_c(b, t, 160); });
  block("mixed_6e", [&](const Tensor& t) { return inception_c(b, t, 192); });
  block("mixed_7a", [&](const Tensor& t) { return reduction_b(b, t); });
  block("mixed_7b", [&](const Tensor& t) { return inception_e(b, t); });
  block("mixed_7c", [&](const Tensor& t) { return inception_e(b, t); });
  b.set_layer(++layer);
  b.in_scope("head", [&] { return b.classifier(x, args.integer("classes")); });
  return std::move(b).build();
}

Graph build_wavenet(const Args& args) {
  // Shapes [N, 1, T, C]: a 1-D signal as a one-row image, as TensorFlow runs conv1d.
  NetBuilder b("wavenet");
  const int64_t channels = args.integer("channels"), skip_channels = args.integer("skip_channels");
  const int64_t classes = args.integer("classes");
  const int32_t layers = args.int32("layers");
  constexpr int kDilationCycle = 10;  // dilations 1, 2, ..., 512, then again
  b.set_layer(0);
  Tensor x = b.input("audio", {args.integer("batch"), 1, args.integer("seq_len"), classes});  // one-hot samples
  x = b.in_scope("causal_conv", [&] { return b.conv2d(x, channels, 1, 2, 1, Padding::same, 1, true); });
  std::vector<Tensor> skips;
  for (int32_t i = 0; i < layers; ++i) {
    b.set_layer(i);
    auto s = b.scope("layer{}", i);
    const int64_t dilation = int64_t{1} << (i % kDilationCycle);
    auto dilated = [&](std::string_view name) {
      return b.in_scope(name, [&] { return b.conv2d(x, channels, 1, 2, 1, Padding::same, dilation, true); });
    };
    Tensor filter = b.tanh(dilated("filter"));
    Tensor gate = b.sigmoid(dilated("gate"));
    Tensor z = b.mul(filter, gate);
    skips.push_back(b.in_scope("skip", [&] { return b.conv2d(z, skip_channels, 1, 1, 1, Padding::same, 1, true); }));
    if (i + 1 < layers)  // the last layer's residual output would feed nothing
      x = b.add(x, b.in_scope("residual", [&] { return b.conv2d(z, channels, 1, 1, 1, Padding::same, 1, true); }));
  }
  b.set_layer(layers);
  auto s = b.scope("head");
  Tensor y = b.relu(b.add_n(skips));
  y = b.relu(b.in_scope("conv1", [&] { return b.conv2d(y, skip_channels, 1, 1, 1, Padding::same, 1, true); }));
  y = b.in_scope("conv2", [&] { return b.conv2d(y, classes, 1, 1, 1, Padding::same, 1, true); });
  b.softmax(y);
  return std::move(b).build();
}

}  // namespace placelab::graphs::zoo
