// The example ops' semantics on the CPU.
#include "references.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

namespace kernelop::examples {
namespace {

using Inputs = std::vector<HostTensor>;
using Outputs = std::vector<HostTensor>;
using Scalars = std::vector<ScalarArg>;

double relu(double v) {
  return v > 0 ? v : 0;
}

template <class Fn>
Reference unary(Fn fn) {
  Reference r;
  r.compute = [fn](Inputs& in, const Scalars&, Outputs& out) {
    for (std::size_t i = 0; i < out[0].values.size(); ++i) out[0].values[i] = fn(in[0].values[i]);
  };
  return r;
}

// Rows of the last axis: (rows, cols) of a tensor.
std::pair<std::int64_t, std::int64_t> rows_cols(const HostTensor& t) {
  std::int64_t cols = t.shape.rank() ? t.shape[t.shape.rank() - 1] : 1;
  return {cols ? t.numel() / cols : 0, cols};
}

Reference rowsum() {
  Reference r;
  r.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    auto [rows, cols] = rows_cols(in[0]);
    if (!cols) rows = out[0].numel();
    for (std::int64_t row = 0; row < rows; ++row) {
      double s = 0;
      for (std::int64_t c = 0; c < cols; ++c)
        s += in[0].values[static_cast<std::size_t>(row * cols + c)];
      out[0].values[static_cast<std::size_t>(row)] = s;
    }
  };
  r.extra_atol = [](const Inputs& in) {
    return 2e-6 * static_cast<double>(rows_cols(in[0]).second);
  };
  return r;
}

std::map<std::string, Reference, std::less<>> make_references() {
  std::map<std::string, Reference, std::less<>> refs;
  refs["kernelop_examples::relu"] = unary(relu);
  refs["kernelop_examples::relu_generic"] = unary(relu);
  refs["kernelop_examples::sigmoid"] = unary([](double v) { return 1.0 / (1.0 + std::exp(-v)); });

  Reference add;
  add.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    for (std::size_t i = 0; i < out[0].values.size(); ++i)
      out[0].values[i] = in[0].values[i] + in[1].values[i];
  };
  refs["kernelop_examples::add"] = add;

  Reference scale;
  scale.compute = [](Inputs& in, const Scalars& s, Outputs& out) {
    // The kernel multiplies in float: round alpha as the kernel receives it.
    double alpha = static_cast<float>(
        s[0].kind == ScalarArg::Kind::Int ? static_cast<double>(s[0].i) : s[0].f);
    for (std::size_t i = 0; i < out[0].values.size(); ++i)
      out[0].values[i] = alpha * in[0].values[i];
  };
  refs["kernelop_examples::scale"] = scale;

  Reference bias;
  bias.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    std::int64_t cols = in[0].shape[in[0].shape.rank() - 1];
    for (std::size_t i = 0; i < out[0].values.size(); ++i) {
      out[0].values[i] = in[0].values[i] + in[1].values[i % static_cast<std::size_t>(cols)];
    }
  };
  refs["kernelop_examples::bias_add_2d"] = bias;

  refs["kernelop_examples::rowsum"] = rowsum();
  refs["kernelop_examples::rowsum_keepdim"] = rowsum();
  refs["kernelop_examples::cluster_rowsum"] = rowsum();

  Reference colsum;
  colsum.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    std::int64_t rows = in[0].shape[0], cols = in[0].shape[1];
    for (std::int64_t c = 0; c < cols; ++c) {
      double s = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        s += in[0].values[static_cast<std::size_t>(r * cols + c)];
      out[0].values[static_cast<std::size_t>(c)] = s;
    }
  };
  colsum.extra_atol = [](const Inputs& in) { return 2e-6 * static_cast<double>(in[0].shape[0]); };
  refs["kernelop_examples::colsum"] = colsum;

  Reference softmax;
  softmax.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    auto [rows, cols] = rows_cols(in[0]);
    for (std::int64_t row = 0; row < rows; ++row) {
      const double* x = in[0].values.data() + row * cols;
      double* y = out[0].values.data() + row * cols;
      double m = *std::max_element(x, x + cols);
      double s = 0;
      for (std::int64_t c = 0; c < cols; ++c) s += std::exp(x[c] - m);
      for (std::int64_t c = 0; c < cols; ++c) y[c] = std::exp(x[c] - m) / s;
    }
  };
  refs["kernelop_examples::softmax"] = softmax;
  refs["kernelop_examples::softmax_tuned"] = softmax;

  Reference gemm;
  gemm.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    std::int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          acc += in[0].values[static_cast<std::size_t>(i * k + p)] *
                 in[1].values[static_cast<std::size_t>(p * n + j)];
        }
        out[0].values[static_cast<std::size_t>(i * n + j)] = acc;
      }
    }
  };
  // float32 sums of k products of values in [-2, 2): the error grows with k.
  gemm.extra_atol = [](const Inputs& in) { return 2e-6 * static_cast<double>(in[0].shape[1]); };
  refs["kernelop_examples::gemm_tiled"] = gemm;

  Reference repeat2;
  repeat2.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    std::int64_t rows = in[0].shape[0], cols = in[0].shape[1];
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < 2 * cols; ++j) {
        out[0].values[static_cast<std::size_t>(r * 2 * cols + j)] =
            in[0].values[static_cast<std::size_t>(r * cols + j % cols)];
      }
    }
  };
  refs["kernelop_examples::repeat2"] = repeat2;

  Reference sin_cos;
  sin_cos.compute = [](Inputs& in, const Scalars&, Outputs& out) {
    for (std::size_t i = 0; i < in[0].values.size(); ++i) {
      out[0].values[i] = std::sin(in[0].values[i]);
      out[1].values[i] = std::cos(in[0].values[i]);
    }
  };
  refs["kernelop_examples::sin_cos"] = sin_cos;

  Reference scatter;
  scatter.make_inputs = [](Inputs& in, std::mt19937_64& rng) {
    default_inputs(in, rng);
    // Distinct destination rows (a permutation prefix), so the result does not depend on which
    // thread writes last; one row out of range to check that it is skipped.
    std::vector<double> rows(static_cast<std::size_t>(in[0].shape[0]));
    std::iota(rows.begin(), rows.end(), 0.0);
    std::shuffle(rows.begin(), rows.end(), rng);
    for (std::size_t i = 0; i < in[1].values.size(); ++i) {
      in[1].values[i] = i < rows.size() ? rows[i] : static_cast<double>(in[0].shape[0] + 7);
    }
    if (!in[1].values.empty() && in[1].values.size() < rows.size()) in[1].values.back() = -1;
  };
  scatter.compute = [](Inputs& in, const Scalars&, Outputs&) {
    std::int64_t width = in[2].shape[in[2].shape.rank() - 1], cache_rows = in[0].shape[0];
    for (std::size_t r = 0; r < in[1].values.size(); ++r) {
      auto dst = static_cast<std::int64_t>(in[1].values[r]);
      if (dst < 0 || dst >= cache_rows) continue;
      for (std::int64_t c = 0; c < width; ++c) {
        in[0].values[static_cast<std::size_t>(dst * width + c)] =
            in[2].values[r * static_cast<std::size_t>(width) + c];
      }
    }
  };
  refs["kernelop_examples::cache_scatter"] = scatter;
  return refs;
}

}  // namespace

const Reference* find_reference(std::string_view op_name) {
  static const auto refs = make_references();
  auto it = refs.find(op_name);
  return it == refs.end() ? nullptr : &it->second;
}

}  // namespace kernelop::examples
