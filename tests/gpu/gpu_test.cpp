// The GPU suite: every example against its CPU reference on fresh random inputs at several
// sizes (outputs poisoned first), streams and threads, zero-size work, rejected arguments, and
// the CUBIN and PTX load paths. Skipped, and reported as skipped, without a CUDA device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include <atomic>
#include <new>

#include "kernelop/compile.hpp"
#include "kernelop/device.hpp"
#include "kernelop/host_tensor.hpp"
#include "kernelop/package.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/spec_json.hpp"
#include "references.hpp"
#include "runtime/driver.hpp"

// Counts heap allocations, to prove that the launch path makes none (Note [launch path]).
// (GCC cannot see that these replacements pair with each other.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<long> g_allocations{0};
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace kernelop {
namespace {

namespace fs = std::filesystem;

fs::path examples_dir() {
  return fs::path(KERNELOP_SOURCE_DIR) / "examples";
}

class Gpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (cuda_available()) {
      ctx_ = new detail::PrimaryContext(0);
      detail::Driver::require().cuCtxSetCurrent(ctx_->get());
    }
  }
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    detail::Driver::require().cuCtxSetCurrent(ctx_->get());
  }
  static detail::PrimaryContext* ctx_;
};
detail::PrimaryContext* Gpu::ctx_ = nullptr;

// Ops compile once per process (through the cache) for the default architectures.
const KernelOp& op(const std::string& name) {
  static std::map<std::string, std::unique_ptr<KernelOp>> ops;
  static std::mutex m;
  std::lock_guard lock(m);
  auto& slot = ops[name];
  if (!slot) {
    slot = std::make_unique<KernelOp>(
        compile(derive_plan(load_op_file(examples_dir() / (name + ".json")))));
  }
  return *slot;
}

struct DeviceTensor {
  HostTensor host;
  DeviceBuffer buffer;
  TensorView view() const { return TensorView{buffer.get(), host.dtype, host.shape, {}, 0}; }
};

DeviceTensor upload(const HostTensor& h) {
  DeviceTensor t{h, DeviceBuffer(h.bytes())};
  t.buffer.upload(h.encode().data(), h.bytes());
  return t;
}

HostTensor download(const DeviceTensor& t) {
  HostTensor h = t.host;
  std::string bytes(h.bytes(), '\0');
  t.buffer.download(bytes.data(), bytes.size());
  h.decode(bytes);
  return h;
}

// Runs `name` on random inputs of `shapes` (and dtypes) and compares every output and mutated
// input with the reference. Returns a one-line summary.
void check_example(const std::string& name, std::vector<Shape> shapes,
                   std::vector<DType> dtypes = {}, std::vector<ScalarArg> scalars = {},
                   void* stream = nullptr) {
  const KernelOp& k = op(name);
  const OpPlan& plan = k.plan();
  const examples::Reference* ref = examples::find_reference(plan.op_name);
  ASSERT_NE(ref, nullptr) << plan.op_name;
  std::vector<HostTensor> inputs;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    DType d = i < dtypes.size() ? dtypes[i] : DType::Float32;
    const auto& decl = plan.tensors[i].dtype;
    if (dtypes.empty() && decl && std::holds_alternative<DType>(*decl)) d = std::get<DType>(*decl);
    inputs.emplace_back(shapes[i], d);
  }
  thread_local std::mt19937_64 rng(std::random_device{}());
  if (ref->make_inputs) {
    ref->make_inputs(inputs, rng);
  } else {
    default_inputs(inputs, rng);
  }
  std::vector<DeviceTensor> in;
  std::vector<TensorView> in_views;
  for (const auto& h : inputs) {
    in.push_back(upload(h));
    in_views.push_back(in.back().view());
  }
  std::vector<Shape> out_shapes = k.output_shapes(in_views, scalars);
  std::vector<DType> out_dtypes = k.output_dtypes(in_views);
  std::vector<DeviceTensor> out;
  std::vector<TensorView> out_views;
  std::vector<HostTensor> want_out;
  for (std::size_t i = 0; i < out_shapes.size(); ++i) {
    HostTensor h(out_shapes[i], out_dtypes[i]);
    out.push_back(DeviceTensor{h, DeviceBuffer(h.bytes())});
    out.back().buffer.fill_bytes(0xff);  // NaN: an element the kernel misses fails the check
    out_views.push_back(out.back().view());
    want_out.push_back(h);
  }
  // Uploads and the poison went through the legacy default stream, which a non-blocking stream
  // does not wait for.
  ASSERT_EQ(detail::Driver::require().cuCtxSynchronize(), CUDA_SUCCESS);
  k.launch(in_views, scalars, out_views, stream);
  ASSERT_EQ(detail::Driver::require().cuCtxSynchronize(), CUDA_SUCCESS);
  std::vector<HostTensor> want_in = inputs;
  ref->compute(want_in, scalars, want_out);
  double extra = ref->extra_atol ? ref->extra_atol(inputs) : 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    Comparison c = compare(download(out[i]), want_out[i], extra);
    EXPECT_TRUE(c.passed()) << name << " output " << i << " shape " << out_shapes[i].to_string()
                            << ": worst element " << c.worst_index << " off by " << c.max_abs_error;
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!plan.tensors[i].mutated) continue;
    Comparison c = compare(download(in[i]), want_in[i]);
    EXPECT_TRUE(c.passed()) << name << " mutated input " << i << ": worst element "
                            << c.worst_index;
  }
}

TEST_F(Gpu, ElementwiseExamplesAtManySizes) {
  for (std::int64_t n : {1ll, 7ll, 255ll, 256ll, 4097ll, (1ll << 20) + 3, (1ll << 24) + 1}) {
    SCOPED_TRACE(n);
    check_example("relu", {{n}});
    check_example("sigmoid", {{n}});
    check_example("sin_cos", {{n}});
    check_example("add", {{n}, {n}});
    check_example("scale", {{n}}, {}, {ScalarArg::of_float(-1.75)});
  }
  check_example("relu", {{3, 5, 7}});  // any rank: flat
  check_example("scale", {{1000}}, {}, {ScalarArg::of_int(3)});
}

TEST_F(Gpu, DtypeGenericReluInEachDtype) {
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (std::int64_t n : {1ll, 1000ll, 4099ll, (1ll << 22) + 5}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + std::to_string(n));
      check_example("relu_generic", {{n}}, {d});
    }
  }
}

TEST_F(Gpu, NdLayoutFoldsLeadingAxesIntoGridZ) {
  for (Shape s :
       {Shape{1, 1}, Shape{17, 33}, Shape{3, 17, 33}, Shape{2, 3, 40, 50}, Shape{513, 1025}}) {
    SCOPED_TRACE(s.to_string());
    check_example("bias_add_2d", {s, {s[s.rank() - 1]}});
  }
}

TEST_F(Gpu, Reductions) {
  for (Shape s : {Shape{1, 1}, Shape{7, 300}, Shape{1000, 4097}, Shape{3, 2, 513}, Shape{5, 0},
                  Shape{64, 100000}}) {
    SCOPED_TRACE(s.to_string());
    check_example("rowsum", {s});
    check_example("rowsum_keepdim", {s});
    if (s[s.rank() - 1] > 0) check_example("softmax", {s});
  }
}

// A thread-block cluster launch (cuLaunchKernelEx): two blocks a row, the second's half read
// through distributed shared memory; a row shorter than two threads' worth, an empty row, many
// rows.
TEST_F(Gpu, ClusterLaunchSumsEachRowAcrossTwoBlocks) {
  for (Shape s : {Shape{1, 1}, Shape{7, 300}, Shape{1000, 4097}, Shape{3, 2, 513}, Shape{5, 0},
                  Shape{64, 100000}}) {
    SCOPED_TRACE(s.to_string());
    check_example("cluster_rowsum", {s});
  }
}

// Note [several launches]: per-SM partials in scratch, then their sum; rows fewer than the SMs
// (blocks with no row write zeros), none, and many.
TEST_F(Gpu, TwoLaunchesWithScratch) {
  for (Shape s : {Shape{1, 1}, Shape{3, 1000}, Shape{0, 7}, Shape{5, 0}, Shape{8192, 4096},
                  Shape{100003, 3}}) {
    SCOPED_TRACE(s.to_string());
    check_example("colsum", {s});
  }
}

TEST_F(Gpu, ShapeChangingAndInPlaceKernels) {
  for (Shape s : {Shape{1, 1}, Shape{17, 33}, Shape{1000, 999}}) check_example("repeat2", {s});
  check_example("cache_scatter", {{100, 64}, {37}, {37, 64}});
  check_example("cache_scatter", {{5000, 128}, {4096}, {4096, 128}});
  check_example("cache_scatter",
                {{8, 3}, {12}, {12, 3}});  // more rows than the cache: extras skipped
}

TEST_F(Gpu, NonDefaultStreamAndManyThreads) {
  DeviceStream stream;
  check_example("softmax", {{64, 1000}}, {}, {}, stream.get());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        detail::Driver::require().cuCtxSetCurrent(ctx_->get());
        DeviceStream s;
        for (int i = 0; i < 20; ++i) {
          check_example(t % 2 ? "relu" : "softmax",
                        {t % 2 ? Shape{100000 + t} : Shape{33, 700 + t}}, {}, {}, s.get());
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(Gpu, LaunchPathAllocatesNothing) {
  const KernelOp& scale = op("scale");
  DeviceBuffer x(4096 * 4), y(4096 * 4);
  std::vector<TensorView> in = {TensorView{x.get(), DType::Float32, {64, 64}, {}, 0}};
  std::vector<TensorView> out = {TensorView{y.get(), DType::Float32, {64, 64}, {}, 0}};
  std::vector<ScalarArg> alpha = {ScalarArg::of_float(2)};
  DeviceStream stream;
  scale.launch(in, alpha, out, stream.get());  // loads the module: allocations allowed here
  long before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) scale.launch(in, alpha, out, stream.get());
  long after = g_allocations.load();
  stream.synchronize();
  EXPECT_EQ(after - before, 0) << "heap allocations in 1000 launches";
  // A tuned op, once its key is in the tuning table: the choice allocates nothing either.
  const KernelOp& tuned = op("softmax_tuned");
  tuned.launch(in, {}, out, stream.get());  // tunes (or reads the table): allocations allowed
  before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) tuned.launch(in, {}, out, stream.get());
  after = g_allocations.load();
  stream.synchronize();
  EXPECT_EQ(after - before, 0) << "heap allocations in 1000 launches of a tuned op";
  // launch_allocating: the outputs made from the shapes the checks computed, nothing else.
  int made = 0;
  auto allocate = [&](std::size_t index, DType dtype, const Shape& shape) {
    ++made;
    EXPECT_EQ(index, 0u);
    EXPECT_EQ(dtype, DType::Float32);
    EXPECT_EQ(shape, (Shape{64, 64}));
    return out[0];
  };
  before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) scale.launch_allocating(in, alpha, allocate, stream.get());
  after = g_allocations.load();
  stream.synchronize();
  EXPECT_EQ(after - before, 0) << "heap allocations in 1000 allocating launches";
  EXPECT_EQ(made, 1000);
}

TEST_F(Gpu, ZeroSizeWorkLaunchesNothing) {
  const KernelOp& relu = op("relu");
  std::vector<TensorView> x = {TensorView{nullptr, DType::Float32, {0}, {}, 0}};
  std::vector<TensorView> y = {TensorView{nullptr, DType::Float32, {0}, {}, 0}};
  EXPECT_NO_THROW(relu.launch(x, {}, y, nullptr));
  check_example("rowsum", {{0, 5}});
  check_example("softmax", {{0, 5}});
}

TEST_F(Gpu, BadArgumentsAreRejectedOnTheDevice) {
  const KernelOp& relu = op("relu");
  DeviceBuffer buf(4096 * 4);
  TensorView good{buf.get(), DType::Float32, {4096}, {}, 0};
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  TensorView half = good;
  half.dtype = DType::Float16;
  expect_error([&] { relu.launch(std::vector{half}, {}, std::vector{good}, nullptr); },
               "input 'x' must be float32");
  TensorView far = good;
  far.device = 7;
  expect_error([&] { relu.launch(std::vector{far}, {}, std::vector{far}, nullptr); },
               "device 7 does not exist");
  TensorView small = good;
  small.shape = Shape{100};
  expect_error([&] { relu.launch(std::vector{good}, {}, std::vector{small}, nullptr); },
               "output 'y' has shape [100] but the op produces [4096]");
  TensorView huge = good;
  huge.shape = Shape{(1ll << 31) + 1};  // never dereferenced: rejected before the launch
  expect_error([&] { relu.launch(std::vector{huge}, {}, std::vector{huge}, nullptr); },
               "'numel(x)' = 2147483649 does not fit the kernel's 32-bit int");
}

// Packages: one built on a machine without a GPU (sm_80 CUBIN + compute_80 PTX) must run on
// this device through the PTX path; one with this device's CUBIN must use it.
fs::path cpu_built_package(const std::string& name) {
  if (const char* dir = std::getenv("KERNELOP_CPU_PACKAGES")) {
    fs::path p = fs::path(dir) / ("kernelop_examples." + name + ".kop");
    if (fs::exists(p)) return p;
  }
  CompileOptions o;
  o.archs = {"sm_80", "compute_80"};
  fs::path p = fs::temp_directory_path() / ("kernelop-gpu-" + name + "-sm80.kop");
  write_package(compile(derive_plan(load_op_file(examples_dir() / (name + ".json"))), o), p);
  return p;
}

TEST_F(Gpu, PackageFromACpuMachineRunsThroughPtx) {
  fs::path path = cpu_built_package("softmax");
  std::cout << "package: " << path
            << (std::getenv("KERNELOP_CPU_PACKAGES") ? " (built on the CPU machine)" : "") << "\n";
  KernelOp k = KernelOp::from_package(path);
  LoadInfo info = k.load(0);
  EXPECT_TRUE(info.via_ptx) << info.image_arch;
  EXPECT_EQ(info.image_arch, "compute_80");
  std::cout << "loaded " << info.image_arch << " on " << info.device_arch << " in " << info.load_ms
            << " ms\n";
  HostTensor x({37, 1000}, DType::Float32);
  std::mt19937_64 rng(7);
  fill_uniform(x, rng, -3, 3);
  DeviceTensor dx = upload(x);
  HostTensor y({37, 1000}, DType::Float32);
  DeviceTensor dy{y, DeviceBuffer(y.bytes())};
  dy.buffer.fill_bytes(0xff);
  k.launch(std::vector{dx.view()}, {}, std::vector{dy.view()}, nullptr);
  ASSERT_EQ(detail::Driver::require().cuCtxSynchronize(), CUDA_SUCCESS);
  std::vector<HostTensor> in = {x}, out = {y};
  examples::find_reference("kernelop_examples::softmax")->compute(in, {}, out);
  EXPECT_TRUE(compare(download(dy), out[0]).passed());
}

TEST_F(Gpu, PackageWithThisDevicesCubinUsesIt) {
  CompileOptions o;  // default architectures include sm_90
  fs::path p = fs::temp_directory_path() / "kernelop-gpu-relu-default.kop";
  write_package(compile(derive_plan(load_op_file(examples_dir() / "relu.json")), o), p);
  KernelOp k = KernelOp::from_package(p);
  LoadInfo info = k.load(0);
  EXPECT_FALSE(info.via_ptx);
  EXPECT_EQ(info.image_arch, info.device_arch);
  LoadOptions ptx;
  ptx.prefer_ptx = true;
  KernelOp forced = KernelOp::from_package(p, ptx);
  EXPECT_TRUE(forced.load(0).via_ptx);
}

TEST_F(Gpu, SecondDeviceWhenPresent) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "only one CUDA device";
  detail::PrimaryContext ctx1(1);
  detail::ScopedContext scope(ctx1.get());
  const KernelOp& relu = op("relu");
  std::vector<float> host(1000, -1.0f);
  host[3] = 2.0f;
  DeviceBuffer x(4000), y(4000);
  x.upload(host.data(), 4000);
  relu.launch(std::vector{TensorView{x.get(), DType::Float32, {1000}, {}, 1}}, {},
              std::vector{TensorView{y.get(), DType::Float32, {1000}, {}, 1}}, nullptr);
  ASSERT_EQ(detail::Driver::require().cuCtxSynchronize(), CUDA_SUCCESS);
  y.download(host.data(), 4000);
  EXPECT_EQ(host[3], 2.0f);
  EXPECT_EQ(host[4], 0.0f);
  EXPECT_EQ(relu.load(1).device, 1);
}

}  // namespace
}  // namespace kernelop
