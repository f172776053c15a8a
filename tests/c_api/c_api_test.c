/* Proves the C ABI (include/kernelop/c_api.h) from plain C11, against a .kop package of the
 * kernelop_examples::scale example (y = alpha * x).
 *
 *   c_api_test PACKAGE.kop cpu   loading, introspection, output shapes and every error path
 *                                that needs no GPU; passes without a GPU or a CUDA driver
 *   c_api_test PACKAGE.kop gpu   real launches through a driver this program dlopens itself;
 *                                exits 77 ("SKIPPED: no CUDA device") without one
 *   c_api_test TRITON.kop triton the Triton example elementwise_scale_mul built by kernelop's
 *                                Python package without a GPU (scripts/stage-gpu): results,
 *                                the specialisation chosen, a misaligned input
 *   c_api_test SIGMOID.kop autograd|autograd_gpu  the autograd example sigmoid with its backward
 *                                chain: the backward ops and their schemas (no GPU needed); with
 *                                autograd_gpu, forward, backward and double backward launched
 *   c_api_test COLSUM.kop launches|launches_gpu  the example colsum (two launches and per-SM
 *                                scratch): the scratch is no output of the ABI; with
 *                                launches_gpu, column sums of a matrix with more rows than SMs
 *   c_api_test ROWS.kop views|views_gpu  tests/c_api/rows_as_columns.json, an output returned as
 *                                a permutation: kop_op_output_permute and its refusals; with
 *                                views_gpu, the launch writes the declared shape, contiguous
 *   c_api_test AXPY.kop cutedsl  the CuTe DSL example axpy (struct parameters, host-side tiling)
 *   c_api_test ADD.kop cutile    the cuTile example scaled_add (arrays, CUBINs without PTX)
 *                                built likewise: every tactic's results at sizes that are not
 *                                multiples of its tile
 *
 * One line per check; exit 1 on the first failure, 0 when all pass. */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernelop/c_api.h"

#define EXIT_SKIPPED 77

static const char* const kName = "kernelop_examples::scale";
static const char* const kSchema = "kernelop_examples::scale(Tensor x, float alpha) -> Tensor";

static int checks_passed = 0;

/* ---- reporting ------------------------------------------------------------------------- */

static const char* status_name(kop_status s) {
  switch (s) {
    case KOP_OK:
      return "KOP_OK";
    case KOP_ERROR_SPEC:
      return "KOP_ERROR_SPEC";
    case KOP_ERROR_TYPE:
      return "KOP_ERROR_TYPE";
    case KOP_ERROR_COMPILE:
      return "KOP_ERROR_COMPILE";
    case KOP_ERROR_CACHE:
      return "KOP_ERROR_CACHE";
    case KOP_ERROR_LAUNCH:
      return "KOP_ERROR_LAUNCH";
    case KOP_ERROR_IO:
      return "KOP_ERROR_IO";
    case KOP_ERROR_FORMAT:
      return "KOP_ERROR_FORMAT";
    case KOP_ERROR_INTERNAL:
      return "KOP_ERROR_INTERNAL";
    case KOP_ERROR_ARGUMENT:
      return "KOP_ERROR_ARGUMENT";
  }
  return "(not a kop_status)";
}

static void fail(int line, const char* what, const char* detail) {
  printf("FAIL %s\n     %s (c_api_test.c:%d)\n", what, detail, line);
  fflush(stdout);
  exit(1);
}

static void pass(const char* what) {
  printf("ok   %s\n", what);
  ++checks_passed;
}

#define CHECK(cond, what)                       \
  do {                                          \
    if (!(cond)) fail(__LINE__, (what), #cond); \
    pass(what);                                 \
  } while (0)

/* A call returned `got`: it must be `want`, kop_last_status() must agree, and kop_last_error()
 * must contain `needle` (for KOP_OK: be empty). */
static void expect_status_at(int line, const char* what, kop_status got, kop_status want,
                             const char* needle) {
  char detail[2048];
  const char* message = kop_last_error();
  if (message == NULL) fail(line, what, "kop_last_error() returned NULL");
  if (got != want) {
    snprintf(detail, sizeof detail, "returned %s, expected %s; kop_last_error(): \"%s\"",
             status_name(got), status_name(want), message);
    fail(line, what, detail);
  }
  if (kop_last_status() != want) {
    snprintf(detail, sizeof detail, "kop_last_status() is %s, expected %s",
             status_name(kop_last_status()), status_name(want));
    fail(line, what, detail);
  }
  if (want == KOP_OK && message[0] != '\0') {
    snprintf(detail, sizeof detail, "kop_last_error() is \"%s\" after a successful call", message);
    fail(line, what, detail);
  }
  if (want != KOP_OK && (message[0] == '\0' || (needle && strstr(message, needle) == NULL))) {
    snprintf(detail, sizeof detail, "kop_last_error() \"%s\" does not contain \"%s\"", message,
             needle ? needle : "(anything)");
    fail(line, what, detail);
  }
  if (want != KOP_OK) {
    printf("ok   %s: %s: %s\n", what, status_name(got), message);
    ++checks_passed;
  } else {
    pass(what);
  }
}

#define EXPECT_STATUS(what, call, want, needle) \
  expect_status_at(__LINE__, (what), (call), (want), (needle))

/* ---- helpers --------------------------------------------------------------------------- */

static kop_tensor tensor(void* data, int32_t dtype, int32_t rank, const int64_t* shape) {
  kop_tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = 0;
  t.rank = rank;
  t.shape = shape;
  t.strides = NULL;
  return t;
}

static kop_scalar float_scalar(double v) {
  kop_scalar s;
  s.kind = KOP_SCALAR_FLOAT;
  s.f = v;
  s.i = 0;
  return s;
}

static kop_scalar int_scalar(int64_t v) {
  kop_scalar s;
  s.kind = KOP_SCALAR_INT;
  s.f = 0;
  s.i = v;
  return s;
}

static kop_scalar bool_scalar(int v) {
  kop_scalar s;
  s.kind = KOP_SCALAR_BOOL;
  s.f = 0;
  s.i = v != 0;
  return s;
}

/* The whole file, or NULL. */
static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  unsigned char* data = NULL;
  size_t used = 0, capacity = 0;
  if (!f) return NULL;
  for (;;) {
    if (used == capacity) {
      size_t grown = capacity ? 2 * capacity : 65536;
      unsigned char* bigger = realloc(data, grown);
      if (!bigger) break;
      data = bigger;
      capacity = grown;
    }
    size_t n = fread(data + used, 1, capacity - used, f);
    used += n;
    if (n == 0) {
      int ok = !ferror(f);
      fclose(f);
      if (!ok) {
        free(data);
        return NULL;
      }
      *size = used;
      return data;
    }
  }
  fclose(f);
  free(data);
  return NULL;
}

/* The op must be the scale example, whichever way it was loaded. */
static void check_introspection(const kop_op* op, const char* how) {
  char what[256];
#define INTRO(cond, label)                               \
  do {                                                   \
    snprintf(what, sizeof what, "%s: %s", how, (label)); \
    CHECK(cond, what);                                   \
  } while (0)
  INTRO(strcmp(kop_op_name(op), kName) == 0, "kop_op_name is \"kernelop_examples::scale\"");
  INTRO(strcmp(kop_op_schema(op), kSchema) == 0, "kop_op_schema is the qualified schema");
  INTRO(kop_op_num_inputs(op) == 1, "one tensor input");
  INTRO(kop_op_num_scalars(op) == 1, "one scalar");
  INTRO(kop_op_num_outputs(op) == 1, "one output");
  INTRO(kop_op_input_name(op, 0) && strcmp(kop_op_input_name(op, 0), "x") == 0,
        "input 0 is named \"x\"");
  INTRO(kop_op_output_name(op, 0) && strcmp(kop_op_output_name(op, 0), "y") == 0,
        "output 0 is named \"y\"");
  INTRO(kop_op_input_name(op, 1) == NULL && kop_op_input_name(op, -1) == NULL,
        "input names out of range are NULL");
  INTRO(kop_op_output_name(op, 1) == NULL && kop_op_output_name(op, -1) == NULL,
        "output names out of range are NULL");
  INTRO(kop_op_output_permute(op, 0, NULL, 0) == 0, "output 0 is returned as written");
#undef INTRO
}

/* ---- threads: per-thread errors, one op shared ---------------------------------------- */

enum { kThreads = 4, kThreadIterations = 2000 };

typedef struct thread_job {
  const kop_op* op;
  int index;
  int ok; /* 1: every call behaved */
  char why[256];
} thread_job;

static void* thread_main(void* arg) {
  thread_job* job = arg;
  job->ok = 0;
  if (kop_last_status() != KOP_OK || kop_last_error()[0] != '\0') {
    snprintf(job->why, sizeof job->why, "a new thread starts with status %s, error \"%s\"",
             status_name(kop_last_status()), kop_last_error());
    return NULL;
  }
  for (int it = 0; it < kThreadIterations; ++it) {
    int64_t shape[2] = {job->index + 1, it + 1};
    kop_tensor x = tensor(NULL, KOP_FLOAT32, 2, shape);
    kop_scalar alpha = float_scalar(1.0);
    int32_t rank = -1, dtype = -1;
    int64_t dims[KOP_MAX_RANK] = {0};
    kop_status s = kop_op_output_shapes(job->op, &x, 1, &alpha, 1, &rank, dims, &dtype);
    if (s != KOP_OK || rank != 2 || dims[0] != shape[0] || dims[1] != shape[1] ||
        dtype != KOP_FLOAT32) {
      snprintf(job->why, sizeof job->why, "iteration %d: output_shapes gave %s", it,
               status_name(s));
      return NULL;
    }
    /* A failing call whose message must be this thread's own. */
    x.dtype = (job->index % 2) ? KOP_INT32 : KOP_FLOAT16;
    s = kop_op_output_shapes(job->op, &x, 1, &alpha, 1, &rank, dims, &dtype);
    const char* want = (job->index % 2) ? "got int32" : "got float16";
    if (s != KOP_ERROR_TYPE || strstr(kop_last_error(), want) == NULL) {
      snprintf(job->why, sizeof job->why,
               "iteration %d: expected a message with \"%s\", got %s "
               "\"%s\"",
               it, want, status_name(s), kop_last_error());
      return NULL;
    }
  }
  job->ok = 1;
  return NULL;
}

static void check_threads(const kop_op* op) {
  pthread_t threads[kThreads];
  thread_job jobs[kThreads];
  kop_scalar alpha = float_scalar(1.0);

  /* Leave an error on this thread: the workers must not see it, nor it theirs. */
  EXPECT_STATUS("threads: an error on the main thread first",
                kop_op_launch(NULL, NULL, 0, &alpha, 1, NULL, 0, NULL), KOP_ERROR_ARGUMENT,
                "op must not be NULL");
  for (int i = 0; i < kThreads; ++i) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].op = op;
    jobs[i].index = i;
    if (pthread_create(&threads[i], NULL, thread_main, &jobs[i]) != 0) {
      fail(__LINE__, "threads", "pthread_create failed");
    }
  }
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < kThreads; ++i) {
    if (!jobs[i].ok) fail(__LINE__, "threads: one op from 4 threads", jobs[i].why);
  }
  pass("threads: 4 threads x 2000 output_shapes calls on one op, each with its own errors");
  CHECK(kop_last_status() == KOP_ERROR_ARGUMENT && strstr(kop_last_error(), "op must not be NULL"),
        "threads: the main thread's error is untouched by the workers'");
}

/* ---- cpu mode ------------------------------------------------------------------------- */

static int run_cpu(const char* path) {
  kop_op* op = NULL;
  kop_op* op_mem = NULL;
  size_t size = 0;
  unsigned char* bytes = NULL;
  /* Device pointers that are never dereferenced: every launch below fails a check before it
   * reaches the driver. */
  void* fake_x = (void*)(uintptr_t)0x10000;
  void* fake_y = (void*)(uintptr_t)0x20000;
  int64_t shape35[2] = {3, 5};
  int64_t shape53[2] = {5, 3};
  int64_t shape04[2] = {0, 4};
  kop_scalar alpha = float_scalar(2.5);
  int32_t ranks[1];
  int64_t shapes[KOP_MAX_RANK];
  int32_t dtypes[1];

  CHECK(kop_abi_version() == KOP_ABI_VERSION, "kop_abi_version() == KOP_ABI_VERSION");
  CHECK(kop_last_status() == KOP_OK && kop_last_error()[0] == '\0',
        "no error before the first call");

  /* Loading. */
  EXPECT_STATUS("kop_load_package", kop_load_package(path, &op), KOP_OK, NULL);
  CHECK(op != NULL, "kop_load_package gives an op");
  bytes = read_file(path, &size);
  if (!bytes) fail(__LINE__, "read the package", path);
  CHECK(size > 64, "the package file is not empty");
  EXPECT_STATUS("kop_load_package_memory", kop_load_package_memory(bytes, size, &op_mem), KOP_OK,
                NULL);
  CHECK(op_mem != NULL, "kop_load_package_memory gives an op");

  /* Introspection. */
  check_introspection(op, "file");
  check_introspection(op_mem, "memory");
  CHECK(strcmp(kop_op_name(NULL), "") == 0 && strcmp(kop_op_schema(NULL), "") == 0,
        "name and schema of a NULL op are \"\"");
  CHECK(kop_op_num_inputs(NULL) == -1 && kop_op_num_scalars(NULL) == -1 &&
            kop_op_num_outputs(NULL) == -1,
        "counts of a NULL op are -1");
  CHECK(kop_op_input_name(NULL, 0) == NULL && kop_op_output_name(NULL, 0) == NULL,
        "names of a NULL op are NULL");

  /* Tactics: an untuned op has one, id 0, with an empty name. */
  {
    uint64_t runs = 7, tunings = 7, hits = 7;
    CHECK(kop_op_num_tactics(op) == 1 && kop_op_num_tactics(NULL) == -1, "one tactic");
    CHECK(kop_op_tactic_name(op, 0) != NULL && kop_op_tactic_name(op, 0)[0] == '\0',
          "tactic 0 has an empty name");
    CHECK(kop_op_tactic_name(op, 1) == NULL && kop_op_tactic_name(op, -1) == NULL,
          "no name for a tactic that does not exist");
    CHECK(kop_op_pinned_tactic(op) == -1 && kop_op_last_tactic(op) == -1, "nothing pinned or run");
    CHECK(kop_op_pin_tactic(op, 1) == KOP_ERROR_SPEC &&
              strstr(kop_last_error(), "cannot pin tactic 1; expected -1 (unpin) or 0..0"),
          "pinning a tactic that does not exist is an error naming the range");
    CHECK(kop_op_pin_tactic(op, 0) == KOP_OK && kop_op_pinned_tactic(op) == 0, "pin tactic 0");
    CHECK(kop_op_pin_tactic(op, -1) == KOP_OK && kop_op_pinned_tactic(op) == -1, "unpin");
    CHECK(kop_op_pin_tactic(NULL, 0) == KOP_ERROR_ARGUMENT, "pinning on NULL is an error");
    CHECK(kop_op_tuning_stats(op, &runs, &tunings, &hits) == KOP_OK && runs == 0 && tunings == 0 &&
              hits == 0,
          "no tuning happened");
    CHECK(kop_op_tuning_stats(op, NULL, &tunings, &hits) == KOP_ERROR_ARGUMENT,
          "tuning stats need their outputs");
  }

  /* Output shapes. */
  {
    kop_tensor x = tensor(NULL, KOP_FLOAT32, 2, shape35);
    ranks[0] = -1;
    dtypes[0] = -1;
    for (int d = 0; d < KOP_MAX_RANK; ++d) shapes[d] = -7;
    EXPECT_STATUS("output shapes for x [3, 5]",
                  kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, dtypes), KOP_OK, NULL);
    CHECK(ranks[0] == 2, "output y has rank 2");
    CHECK(shapes[0] == 3 && shapes[1] == 5, "output y has dims 3, 5");
    CHECK(shapes[2] == -7, "dims past the rank are left alone");
    CHECK(dtypes[0] == KOP_FLOAT32, "output y is KOP_FLOAT32");

    kop_scalar int_alpha = int_scalar(3);
    EXPECT_STATUS("an int scalar is accepted for a float scalar",
                  kop_op_output_shapes(op_mem, &x, 1, &int_alpha, 1, ranks, shapes, dtypes), KOP_OK,
                  NULL);

    kop_tensor x0 = tensor(NULL, KOP_FLOAT32, 0, NULL); /* rank 0 needs no shape array */
    EXPECT_STATUS("output shapes for a rank-0 x",
                  kop_op_output_shapes(op, &x0, 1, &alpha, 1, ranks, shapes, dtypes), KOP_OK, NULL);
    CHECK(ranks[0] == 0, "a rank-0 x gives a rank-0 y");
  }

  /* Argument errors. */
  {
    kop_tensor x = tensor(NULL, KOP_FLOAT32, 2, shape35);
    kop_tensor y = tensor(fake_y, KOP_FLOAT32, 2, shape35);
    kop_tensor two[2];
    two[0] = x;
    two[1] = x;

    x.dtype = KOP_FLOAT16;
    EXPECT_STATUS("a float16 x", kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, dtypes),
                  KOP_ERROR_TYPE, "input 'x' must be float32");
    x.dtype = 99;
    EXPECT_STATUS("a dtype code that is not a kop_dtype",
                  kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, dtypes), KOP_ERROR_TYPE,
                  "not a kop_dtype");
    x.dtype = KOP_FLOAT32;
    x.rank = KOP_MAX_RANK + 1;
    EXPECT_STATUS("rank KOP_MAX_RANK + 1",
                  kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, dtypes), KOP_ERROR_TYPE,
                  "has rank 17");
    x.rank = 2;
    x.shape = NULL;
    EXPECT_STATUS("rank 2 without a shape array",
                  kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, dtypes), KOP_ERROR_TYPE,
                  "with a shape array");
    x.shape = shape35;

    EXPECT_STATUS("two tensor inputs",
                  kop_op_output_shapes(op, two, 2, &alpha, 1, ranks, shapes, dtypes),
                  KOP_ERROR_TYPE, "expected 1 tensor input(s) (x), got 2");
    EXPECT_STATUS("no tensor input",
                  kop_op_output_shapes(op, NULL, 0, &alpha, 1, ranks, shapes, dtypes),
                  KOP_ERROR_TYPE, "expected 1 tensor input(s) (x), got 0");
    EXPECT_STATUS("two tensor inputs to a launch",
                  kop_op_launch(op, two, 2, &alpha, 1, &y, 1, NULL), KOP_ERROR_TYPE,
                  "expected 1 tensor input(s)");
    EXPECT_STATUS("no scalar", kop_op_output_shapes(op, &x, 1, NULL, 0, ranks, shapes, dtypes),
                  KOP_ERROR_TYPE, "expected 1 scalar input(s) (alpha), got 0");

    kop_scalar flag = bool_scalar(1);
    EXPECT_STATUS("a bool for the float scalar",
                  kop_op_output_shapes(op, &x, 1, &flag, 1, ranks, shapes, dtypes), KOP_ERROR_TYPE,
                  "scalar 'alpha' must be a float");
    EXPECT_STATUS("a bool for the float scalar, at launch",
                  kop_op_launch(op, &x, 1, &flag, 1, &y, 1, NULL), KOP_ERROR_TYPE,
                  "scalar 'alpha' must be a float");
    kop_scalar odd = float_scalar(1.0);
    odd.kind = 7;
    EXPECT_STATUS("a scalar kind that is not a kop_scalar_kind",
                  kop_op_output_shapes(op, &x, 1, &odd, 1, ranks, shapes, dtypes), KOP_ERROR_TYPE,
                  "not a kop_scalar_kind");

    /* NULL pointers and bad counts. */
    EXPECT_STATUS("output shapes of a NULL op",
                  kop_op_output_shapes(NULL, &x, 1, &alpha, 1, ranks, shapes, dtypes),
                  KOP_ERROR_ARGUMENT, "op must not be NULL");
    EXPECT_STATUS("launch of a NULL op", kop_op_launch(NULL, &x, 1, &alpha, 1, &y, 1, NULL),
                  KOP_ERROR_ARGUMENT, "op must not be NULL");
    EXPECT_STATUS("NULL ranks", kop_op_output_shapes(op, &x, 1, &alpha, 1, NULL, shapes, dtypes),
                  KOP_ERROR_ARGUMENT, "must not be NULL");
    EXPECT_STATUS("NULL shapes", kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, NULL, dtypes),
                  KOP_ERROR_ARGUMENT, "must not be NULL");
    EXPECT_STATUS("NULL dtypes", kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, NULL),
                  KOP_ERROR_ARGUMENT, "must not be NULL");
    EXPECT_STATUS("one input but a NULL inputs array",
                  kop_op_output_shapes(op, NULL, 1, &alpha, 1, ranks, shapes, dtypes),
                  KOP_ERROR_ARGUMENT, "count/pointer");
    EXPECT_STATUS("a negative input count",
                  kop_op_output_shapes(op, &x, -1, &alpha, 1, ranks, shapes, dtypes),
                  KOP_ERROR_ARGUMENT, "count/pointer");
    EXPECT_STATUS("one output but a NULL outputs array",
                  kop_op_launch(op, &x, 1, &alpha, 1, NULL, 1, NULL), KOP_ERROR_ARGUMENT,
                  "count/pointer");
    EXPECT_STATUS("an output count over 64", kop_op_launch(op, &x, 1, &alpha, 1, &y, 65, NULL),
                  KOP_ERROR_ARGUMENT, "count/pointer");

    kop_op* sentinel = (kop_op*)(uintptr_t)0x1;
    kop_op* out = sentinel;
    EXPECT_STATUS("load with a NULL out", kop_load_package(path, NULL), KOP_ERROR_ARGUMENT,
                  "must not be NULL");
    EXPECT_STATUS("load with a NULL path", kop_load_package(NULL, &out), KOP_ERROR_ARGUMENT,
                  "must not be NULL");
    EXPECT_STATUS("load from memory with a NULL out", kop_load_package_memory(bytes, size, NULL),
                  KOP_ERROR_ARGUMENT, "must not be NULL");
    EXPECT_STATUS("load from memory with NULL data", kop_load_package_memory(NULL, size, &out),
                  KOP_ERROR_ARGUMENT, "must not be NULL");
    kop_op_destroy(NULL);
    pass("kop_op_destroy(NULL) does nothing");

    /* A successful call clears the last error. */
    EXPECT_STATUS("a successful call after a failure",
                  kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, dtypes), KOP_OK, NULL);

    /* Files and bytes that are not packages. */
    out = sentinel;
    EXPECT_STATUS("a missing file",
                  kop_load_package("/nonexistent/kernelop/c_api_test/missing.kop", &out),
                  KOP_ERROR_IO, "cannot read package");
    CHECK(out == NULL, "a failed load sets *out to NULL");
    EXPECT_STATUS("a directory", kop_load_package("/", &out), KOP_ERROR_IO, "is a directory");

    unsigned char* damaged = malloc(size);
    if (!damaged) fail(__LINE__, "malloc", "out of memory");
    memcpy(damaged, bytes, size);
    damaged[size / 2] ^= 0x5A;
    out = sentinel;
    EXPECT_STATUS("a damaged package (one byte flipped mid-file)",
                  kop_load_package_memory(damaged, size, &out), KOP_ERROR_FORMAT,
                  "checksum mismatch");
    CHECK(out == NULL, "a failed memory load sets *out to NULL");
    EXPECT_STATUS("a truncated package", kop_load_package_memory(bytes, size - 1, &out),
                  KOP_ERROR_FORMAT, "truncated");
    free(damaged);

    static const char garbage[] = "this is plainly not a kernelop package, just some text....";
    EXPECT_STATUS("garbage bytes", kop_load_package_memory(garbage, sizeof garbage, &out),
                  KOP_ERROR_FORMAT, "not a kernelop package");
    EXPECT_STATUS("zero bytes", kop_load_package_memory(garbage, 0, &out), KOP_ERROR_FORMAT,
                  "not a kernelop package");
  }

  /* Launch-time checks that fail before the driver is needed. */
  {
    kop_tensor x = tensor(fake_x, KOP_FLOAT32, 2, shape35);
    kop_tensor y = tensor(fake_y, KOP_FLOAT32, 2, shape53);
    EXPECT_STATUS("launch: y of the wrong shape", kop_op_launch(op, &x, 1, &alpha, 1, &y, 1, NULL),
                  KOP_ERROR_LAUNCH, "output 'y' has shape [5, 3] but the op produces [3, 5]");
    y.shape = shape35;
    y.dtype = KOP_FLOAT16;
    EXPECT_STATUS("launch: y of the wrong dtype", kop_op_launch(op, &x, 1, &alpha, 1, &y, 1, NULL),
                  KOP_ERROR_TYPE, "output 'y' must be float32");
    y.dtype = KOP_FLOAT32;
    EXPECT_STATUS("launch: no output", kop_op_launch(op, &x, 1, &alpha, 1, NULL, 0, NULL),
                  KOP_ERROR_TYPE, "expected 1 output(s), got 0");
    y.device = 1;
    EXPECT_STATUS("launch: y on another device", kop_op_launch(op, &x, 1, &alpha, 1, &y, 1, NULL),
                  KOP_ERROR_LAUNCH, "all tensors must be on one device");
    y.device = 0;
    x.data = NULL;
    EXPECT_STATUS("launch: x with a null data pointer",
                  kop_op_launch(op, &x, 1, &alpha, 1, &y, 1, NULL), KOP_ERROR_LAUNCH,
                  "input 'x' has a null data pointer");
    x.data = fake_x;
    int64_t transposed[2] = {1, 3};
    x.strides = transposed;
    EXPECT_STATUS("launch: a non-contiguous x", kop_op_launch(op, &x, 1, &alpha, 1, &y, 1, NULL),
                  KOP_ERROR_LAUNCH, "input 'x' is not contiguous");
  }

  /* Zero-element launch: nothing to launch, so no GPU, driver or data pointer is needed. */
  {
    kop_tensor x = tensor(NULL, KOP_FLOAT32, 2, shape04);
    kop_tensor y = tensor(NULL, KOP_FLOAT32, 2, shape04);
    EXPECT_STATUS("output shapes for x [0, 4]",
                  kop_op_output_shapes(op, &x, 1, &alpha, 1, ranks, shapes, dtypes), KOP_OK, NULL);
    CHECK(ranks[0] == 2 && shapes[0] == 0 && shapes[1] == 4, "x [0, 4] gives y [0, 4]");
    EXPECT_STATUS("a zero-element launch (NULL data, no GPU needed)",
                  kop_op_launch(op, &x, 1, &alpha, 1, &y, 1, NULL), KOP_OK, NULL);
    EXPECT_STATUS("a zero-element launch of the memory-loaded op",
                  kop_op_launch(op_mem, &x, 1, &alpha, 1, &y, 1, NULL), KOP_OK, NULL);
  }

  check_threads(op);

  kop_op_destroy(op);
  kop_op_destroy(op_mem);
  free(bytes);
  printf("PASSED: %d checks (cpu)\n", checks_passed);
  return 0;
}

/* ---- gpu mode: the driver, dlopen'd here with the driver's C types (no cuda.h) ---------- */

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef unsigned long long CUdeviceptr;

typedef CUresult (*cu_init_fn)(unsigned int flags);
typedef CUresult (*cu_device_get_count_fn)(int* count);
typedef CUresult (*cu_device_get_fn)(CUdevice* device, int ordinal);
typedef CUresult (*cu_primary_ctx_retain_fn)(CUcontext* ctx, CUdevice device);
typedef CUresult (*cu_ctx_set_current_fn)(CUcontext ctx);
typedef CUresult (*cu_mem_alloc_fn)(CUdeviceptr* ptr, size_t bytes);
typedef CUresult (*cu_mem_free_fn)(CUdeviceptr ptr);
typedef CUresult (*cu_memcpy_htod_fn)(CUdeviceptr dst, const void* src, size_t bytes);
typedef CUresult (*cu_memcpy_dtoh_fn)(void* dst, CUdeviceptr src, size_t bytes);
typedef CUresult (*cu_ctx_synchronize_fn)(void);

typedef struct cuda_driver {
  cu_init_fn cuInit;
  cu_device_get_count_fn cuDeviceGetCount;
  cu_device_get_fn cuDeviceGet;
  cu_primary_ctx_retain_fn cuDevicePrimaryCtxRetain;
  cu_ctx_set_current_fn cuCtxSetCurrent;
  cu_mem_alloc_fn cuMemAlloc;
  cu_mem_free_fn cuMemFree;
  cu_memcpy_htod_fn cuMemcpyHtoD;
  cu_memcpy_dtoh_fn cuMemcpyDtoH;
  cu_ctx_synchronize_fn cuCtxSynchronize;
} cuda_driver;

/* dlsym into a function pointer without the object-to-function pointer cast ISO C lacks. */
static int resolve(void* lib, const char* name, void* fn_ptr, size_t fn_size) {
  void* sym = dlsym(lib, name);
  if (!sym || fn_size != sizeof sym) return 0;
  memcpy(fn_ptr, &sym, sizeof sym);
  return 1;
}

static void skip(const char* why) {
  printf("note: %s\nSKIPPED: no CUDA device\n", why);
  fflush(stdout);
  exit(EXIT_SKIPPED);
}

static void cu_check(int line, CUresult r, const char* call) {
  if (r != 0) {
    char detail[128];
    snprintf(detail, sizeof detail, "CUresult %d", r);
    fail(line, call, detail);
  }
}
#define CU(call) cu_check(__LINE__, (call), #call)

/* A deterministic sequence of normal floats of both signs (no denormals, so flush-to-zero
 * cannot change a product). */
static float next_value(uint32_t* state) {
  *state = *state * 1664525u + 1013904223u;
  int32_t v = (int32_t)(*state >> 8) - (1 << 23); /* [-2^23, 2^23) */
  return (float)v * (1.0f / 3000.0f);
}

/* One op launched from several threads that have no current context, before it has been
 * loaded on the device: the lazy load races, each launch sets the primary context itself. */
typedef struct launch_job {
  const kop_op* op;
  kop_tensor in;
  kop_tensor out;
  kop_scalar alpha;
  kop_status status;
  char why[256];
} launch_job;

static void* launch_main(void* arg) {
  launch_job* job = arg;
  for (int it = 0; it < 50; ++it) {
    job->status = kop_op_launch(job->op, &job->in, 1, &job->alpha, 1, &job->out, 1, NULL);
    if (job->status != KOP_OK) {
      snprintf(job->why, sizeof job->why, "%s: %s", status_name(job->status), kop_last_error());
      break;
    }
  }
  return NULL;
}

/* Resolves the driver's functions, initialises it and makes device 0's primary context current;
 * skips (exit 77) without a driver or a device. */
static void open_driver(cuda_driver* out, void* lib, int* count) {
  cuda_driver cu;
  CUdevice dev = 0;
  CUcontext ctx = NULL;
  if (!lib) {
    const char* err = dlerror();
    skip(err ? err : "dlopen(libcuda.so.1) failed");
  }
#define RESOLVE(field, symbol)                                           \
  if (!resolve(lib, symbol, (void*)&cu.field, sizeof cu.field)) {        \
    fail(__LINE__, "resolve the driver", "libcuda.so.1 has no " symbol); \
  }
  RESOLVE(cuInit, "cuInit")
  RESOLVE(cuDeviceGetCount, "cuDeviceGetCount")
  RESOLVE(cuDeviceGet, "cuDeviceGet")
  RESOLVE(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
  RESOLVE(cuCtxSetCurrent, "cuCtxSetCurrent")
  RESOLVE(cuMemAlloc, "cuMemAlloc_v2")
  RESOLVE(cuMemFree, "cuMemFree_v2")
  RESOLVE(cuMemcpyHtoD, "cuMemcpyHtoD_v2")
  RESOLVE(cuMemcpyDtoH, "cuMemcpyDtoH_v2")
  RESOLVE(cuCtxSynchronize, "cuCtxSynchronize")
#undef RESOLVE
  {
    CUresult r = cu.cuInit(0);
    if (r != 0) {
      char why[64];
      snprintf(why, sizeof why, "cuInit failed with CUresult %d", r);
      skip(why);
    }
  }
  if (cu.cuDeviceGetCount(count) != 0 || *count < 1) skip("the driver reports no device");

  CU(cu.cuDeviceGet(&dev, 0));
  CU(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu.cuCtxSetCurrent(ctx));
  *out = cu;
}

static int run_gpu(const char* path) {
  enum { kN = 4099, kPad = 64 };
  cuda_driver cu;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int count = 0;
  CUdeviceptr dx = 0, dy = 0;
  float* x = malloc(kN * sizeof(float));
  float* y = malloc((kN + kPad) * sizeof(float));
  kop_op* op = NULL;
  kop_op* op_mem = NULL;
  size_t size = 0;
  unsigned char* bytes = NULL;
  int64_t shape[1] = {kN};
  int64_t short_shape[1] = {kN - 1};

  open_driver(&cu, lib, &count);
  if (!x || !y) fail(__LINE__, "malloc", "out of memory");
  printf("ok   CUDA driver loaded, %d device(s), primary context of device 0 current\n", count);

  EXPECT_STATUS("kop_load_package", kop_load_package(path, &op), KOP_OK, NULL);
  bytes = read_file(path, &size);
  if (!bytes) fail(__LINE__, "read the package", path);
  EXPECT_STATUS("kop_load_package_memory", kop_load_package_memory(bytes, size, &op_mem), KOP_OK,
                NULL);
  free(bytes);

  uint32_t state = 12345u;
  int negatives = 0;
  for (int i = 0; i < kN; ++i) {
    x[i] = next_value(&state);
    negatives += x[i] < 0;
  }
  CHECK(negatives > kN / 4 && negatives < 3 * kN / 4, "x holds negatives and positives");
  CU(cu.cuMemAlloc(&dx, kN * sizeof(float)));
  CU(cu.cuMemAlloc(&dy, (kN + kPad) * sizeof(float)));
  CU(cu.cuMemcpyHtoD(dx, x, kN * sizeof(float)));

  const kop_op* ops[2] = {op, op_mem};
  const char* const how[2] = {"file", "memory"};
  for (int k = 0; k < 2; ++k) {
    char what[128];
    kop_tensor in = tensor((void*)(uintptr_t)dx, KOP_FLOAT32, 1, shape);
    kop_tensor out = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 1, shape);
    /* alpha as a float, then as an int (promoted to the kernel's float). */
    kop_scalar alphas[2];
    float factors[2] = {2.5f, 3.0f};
    alphas[0] = float_scalar(2.5);
    alphas[1] = int_scalar(3);
    for (int a = 0; a < 2; ++a) {
      memset(y, 0xFF, (kN + kPad) * sizeof(float)); /* NaN everywhere */
      CU(cu.cuMemcpyHtoD(dy, y, (kN + kPad) * sizeof(float)));
      snprintf(what, sizeof what, "%s: launch scale(x[%d], alpha=%s) on the NULL stream", how[k],
               kN, a ? "int 3" : "2.5");
      EXPECT_STATUS(what, kop_op_launch(ops[k], &in, 1, &alphas[a], 1, &out, 1, NULL), KOP_OK,
                    NULL);
      CU(cu.cuCtxSynchronize());
      CU(cu.cuMemcpyDtoH(y, dy, (kN + kPad) * sizeof(float)));
      for (int i = 0; i < kN; ++i) {
        float expected = factors[a] * x[i];
        if (!(y[i] == expected)) {
          char detail[160];
          snprintf(detail, sizeof detail, "y[%d] = %.9g, expected %.9g * %.9g = %.9g", i, y[i],
                   factors[a], x[i], expected);
          fail(__LINE__, what, detail);
        }
      }
      snprintf(what, sizeof what, "%s: y == %s * x exactly for all %d elements", how[k],
               a ? "3" : "2.5f", kN);
      pass(what);
      unsigned char poison[kPad * sizeof(float)];
      memset(poison, 0xFF, sizeof poison);
      snprintf(what, sizeof what, "%s: the %d floats past y are untouched", how[k], kPad);
      CHECK(memcmp(y + kN, poison, sizeof poison) == 0, what);
    }
  }

  {
    kop_scalar alpha = float_scalar(2.5);
    kop_tensor in = tensor((void*)(uintptr_t)dx, KOP_FLOAT32, 1, shape);
    kop_tensor out = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 1, short_shape);
    EXPECT_STATUS("launch with y of the wrong shape",
                  kop_op_launch(op, &in, 1, &alpha, 1, &out, 1, NULL), KOP_ERROR_LAUNCH,
                  "output 'y' has shape [4098] but the op produces [4099]");
    if (count < 64) {
      out.shape = shape;
      in.device = count;
      out.device = count;
      EXPECT_STATUS("launch on a device that does not exist",
                    kop_op_launch(op, &in, 1, &alpha, 1, &out, 1, NULL), KOP_ERROR_LAUNCH,
                    "does not exist");
    }
    in.device = 64;
    out.device = 64;
    EXPECT_STATUS("launch on device 64", kop_op_launch(op, &in, 1, &alpha, 1, &out, 1, NULL),
                  KOP_ERROR_LAUNCH, "out of range");
    in.device = 0;
    out.device = 0;
    EXPECT_STATUS("a successful launch clears the error",
                  kop_op_launch(op, &in, 1, &alpha, 1, &out, 1, NULL), KOP_OK, NULL);
  }

  {
    enum { kLaunchThreads = 4 };
    kop_op* fresh = NULL;
    CUdeviceptr dys = 0;
    pthread_t threads[kLaunchThreads];
    launch_job jobs[kLaunchThreads];
    float* ys = malloc(kLaunchThreads * kN * sizeof(float));
    if (!ys) fail(__LINE__, "malloc", "out of memory");
    EXPECT_STATUS("load a fresh op for the threads", kop_load_package(path, &fresh), KOP_OK, NULL);
    CU(cu.cuMemAlloc(&dys, kLaunchThreads * kN * sizeof(float)));
    memset(ys, 0xFF, kLaunchThreads * kN * sizeof(float));
    CU(cu.cuMemcpyHtoD(dys, ys, kLaunchThreads * kN * sizeof(float)));
    for (int t = 0; t < kLaunchThreads; ++t) {
      memset(&jobs[t], 0, sizeof jobs[t]);
      jobs[t].op = fresh;
      jobs[t].in = tensor((void*)(uintptr_t)dx, KOP_FLOAT32, 1, shape);
      jobs[t].out = tensor((void*)(uintptr_t)(dys + (CUdeviceptr)t * kN * sizeof(float)),
                           KOP_FLOAT32, 1, shape);
      jobs[t].alpha = float_scalar(t + 1.0);
      if (pthread_create(&threads[t], NULL, launch_main, &jobs[t]) != 0) {
        fail(__LINE__, "threads", "pthread_create failed");
      }
    }
    for (int t = 0; t < kLaunchThreads; ++t) pthread_join(threads[t], NULL);
    for (int t = 0; t < kLaunchThreads; ++t) {
      if (jobs[t].status != KOP_OK) fail(__LINE__, "launch from a thread", jobs[t].why);
    }
    CU(cu.cuCtxSynchronize());
    CU(cu.cuMemcpyDtoH(ys, dys, kLaunchThreads * kN * sizeof(float)));
    for (int t = 0; t < kLaunchThreads; ++t) {
      for (int i = 0; i < kN; ++i) {
        float expected = (float)(t + 1) * x[i];
        if (!(ys[t * kN + i] == expected)) {
          char detail[160];
          snprintf(detail, sizeof detail, "thread %d: y[%d] = %.9g, expected %.9g", t, i,
                   ys[t * kN + i], expected);
          fail(__LINE__, "launches from threads", detail);
        }
      }
    }
    pass("4 threads without a current context x 50 launches of one not-yet-loaded op");
    kop_op_destroy(fresh);
    CU(cu.cuMemFree(dys));
    free(ys);
  }

  CU(cu.cuCtxSynchronize());
  kop_op_destroy(op);
  kop_op_destroy(op_mem);
  CU(cu.cuMemFree(dx));
  CU(cu.cuMemFree(dy));
  free(x);
  free(y);
  printf("PASSED: %d checks (gpu)\n", checks_passed);
  return 0;
}

/* triton mode: the package of the Triton example kop_triton::elementwise_scale_mul (Z = X * Y * a +
 * b), recorded and compiled by kernelop's Python package on a machine without a GPU, run from C
 * with no Python and no Triton: every result, the specialisation the launch chose, and a misaligned
 * input. */
static int run_triton(const char* path) {
  enum { kRows = 64, kCols = 1024, kN = kRows * kCols };
  cuda_driver cu;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int count = 0;
  CUdeviceptr dx = 0, dxm = 0, dy = 0, dz = 0;
  float* x = malloc(kN * sizeof(float));
  float* y = malloc(kN * sizeof(float));
  float* z = malloc(kN * sizeof(float));
  kop_op* op = NULL;
  int64_t shape[2] = {kRows, kCols};
  char what[160];

  if (access(path, R_OK) != 0) skip("no Triton package (scripts/stage-gpu builds it)");
  open_driver(&cu, lib, &count);
  if (!x || !y || !z) fail(__LINE__, "malloc", "out of memory");
  EXPECT_STATUS("kop_load_package (Triton)", kop_load_package(path, &op), KOP_OK, NULL);
  CHECK(strcmp(kop_op_name(op), "kop_triton::elementwise_scale_mul") == 0, "the op's name");
  CHECK(kop_op_num_tactics(op) == 6, "2 configs x 3 specialisations = 6 tactics");
  uint32_t state = 777u;
  for (int i = 0; i < kN; ++i) {
    x[i] = next_value(&state);
    y[i] = next_value(&state);
  }
  /* X twice: at dx (aligned), and one float into dxm, 4 bytes past a 16-byte boundary. */
  CU(cu.cuMemAlloc(&dx, kN * sizeof(float)));
  CU(cu.cuMemAlloc(&dxm, (kN + 1) * sizeof(float)));
  CU(cu.cuMemAlloc(&dy, kN * sizeof(float)));
  CU(cu.cuMemAlloc(&dz, kN * sizeof(float)));
  CU(cu.cuMemcpyHtoD(dx, x, kN * sizeof(float)));
  CU(cu.cuMemcpyHtoD(dxm + sizeof(float), x, kN * sizeof(float)));
  CU(cu.cuMemcpyHtoD(dy, y, kN * sizeof(float)));
  kop_scalar scalars[2];
  scalars[0] = float_scalar(0.5); /* b */
  scalars[1] = int_scalar(3);     /* a */
  for (int misaligned = 0; misaligned < 2; ++misaligned) {
    kop_tensor in[2];
    in[0] =
        tensor((void*)(uintptr_t)(misaligned ? dxm + sizeof(float) : dx), KOP_FLOAT32, 2, shape);
    in[1] = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 2, shape);
    kop_tensor out = tensor((void*)(uintptr_t)dz, KOP_FLOAT32, 2, shape);
    memset(z, 0xFF, kN * sizeof(float));
    CU(cu.cuMemcpyHtoD(dz, z, kN * sizeof(float)));
    snprintf(what, sizeof what, "launch elementwise_scale_mul(%s X, Y, b=0.5, a=3)",
             misaligned ? "misaligned" : "aligned");
    EXPECT_STATUS(what, kop_op_launch(op, in, 2, scalars, 2, &out, 1, NULL), KOP_OK, NULL);
    CU(cu.cuCtxSynchronize());
    CU(cu.cuMemcpyDtoH(z, dz, kN * sizeof(float)));
    for (int i = 0; i < kN; ++i) {
      float expected = x[i] * y[i] * 3.0f + 0.5f;
      float tolerance = 1e-5f * (expected < 0 ? -expected : expected) + 1e-6f;
      float diff = z[i] - expected;
      if (!(diff <= tolerance && -diff <= tolerance)) {
        char detail[160];
        snprintf(detail, sizeof detail, "Z[%d] = %.9g, expected %.9g", i, z[i], expected);
        fail(__LINE__, what, detail);
      }
    }
    snprintf(what, sizeof what, "Z == X * Y * 3 + 0.5 for all %d elements", kN);
    pass(what);
    const char* tactic = kop_op_tactic_name(op, kop_op_last_tactic(op));
    snprintf(what, sizeof what, "the launch ran tactic '%s'", tactic);
    CHECK(strstr(tactic, misaligned ? "divisible=0" : "divisible=1") != NULL, what);
  }
  {
    kop_tensor in[2];
    in[0] = tensor((void*)(uintptr_t)(dxm + sizeof(float)), KOP_FLOAT32, 2, shape);
    in[1] = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 2, shape);
    kop_tensor out = tensor((void*)(uintptr_t)dz, KOP_FLOAT32, 2, shape);
    EXPECT_STATUS("pin tactic 1 (aligned pointers)", kop_op_pin_tactic(op, 1), KOP_OK, NULL);
    EXPECT_STATUS("the pinned aligned tactic refuses the misaligned X",
                  kop_op_launch(op, in, 2, scalars, 2, &out, 1, NULL), KOP_ERROR_LAUNCH,
                  "aligned(X, 16)");
  }
  kop_op_destroy(op);
  CU(cu.cuMemFree(dx));
  CU(cu.cuMemFree(dxm));
  CU(cu.cuMemFree(dy));
  CU(cu.cuMemFree(dz));
  free(x);
  free(y);
  free(z);
  printf("PASSED: %d checks (triton)\n", checks_passed);
  return 0;
}

/* Fails `what` unless out[i] == alpha * x[i] + y[i] for i < n, and out[i] is still the NaN it was
 * filled with for n <= i < total (nothing written past the end). The kernel may fuse the
 * multiply-add: the error allowed is relative to the terms, not the sum. */
static void expect_axpy(const float* out, float alpha, const float* x, const float* y, int n,
                        int total, const char* what) {
  for (int i = 0; i < total; ++i) {
    float expected = alpha * x[i] + y[i];
    float tolerance = 1e-6f * (fabsf(alpha) * fabsf(x[i]) + fabsf(y[i])) + 1e-6f;
    float diff = out[i] - expected;
    int in_range = i < n;
    if (in_range ? !(diff <= tolerance && -diff <= tolerance) : !(out[i] != out[i])) {
      char detail[160];
      snprintf(detail, sizeof detail, "out[%d] = %.9g, expected %.9g%s", i, out[i],
               in_range ? expected : (double)NAN, in_range ? "" : " (past the end: untouched)");
      fail(__LINE__, what, detail);
    }
  }
}

/* cutedsl mode: the package of the CuTe DSL example kop_cutedsl::axpy (out = alpha * x + y), whose
 * kernel takes each tensor as a struct of its pointer and the host's tiled layout, recorded and
 * compiled by kernelop's Python package without a GPU, run from C with no Python and no CuTe DSL.
 */
static int run_cutedsl(const char* path) {
  enum { kMaxN = 37 * 1001 };
  static const int64_t kShapes[3][2] = {{37, 1001}, {4, 64}, {1, 3}};
  cuda_driver cu;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int count = 0;
  CUdeviceptr dx = 0, dy = 0, dz = 0;
  float* x = malloc(kMaxN * sizeof(float));
  float* y = malloc(kMaxN * sizeof(float));
  float* z = malloc(kMaxN * sizeof(float));
  kop_op* op = NULL;
  char what[160];

  if (access(path, R_OK) != 0) skip("no CuTe DSL package (scripts/stage-gpu builds it)");
  open_driver(&cu, lib, &count);
  if (!x || !y || !z) fail(__LINE__, "malloc", "out of memory");
  EXPECT_STATUS("kop_load_package (CuTe DSL)", kop_load_package(path, &op), KOP_OK, NULL);
  CHECK(strcmp(kop_op_name(op), "kop_cutedsl::axpy") == 0, "the op's name");
  CHECK(kop_op_num_tactics(op) == 2, "2 configs = 2 tactics");
  uint32_t state = 4242u;
  for (int i = 0; i < kMaxN; ++i) {
    x[i] = next_value(&state);
    y[i] = next_value(&state);
  }
  CU(cu.cuMemAlloc(&dx, kMaxN * sizeof(float)));
  CU(cu.cuMemAlloc(&dy, kMaxN * sizeof(float)));
  CU(cu.cuMemAlloc(&dz, kMaxN * sizeof(float)));
  CU(cu.cuMemcpyHtoD(dx, x, kMaxN * sizeof(float)));
  CU(cu.cuMemcpyHtoD(dy, y, kMaxN * sizeof(float)));
  kop_scalar alpha = float_scalar(-1.5);
  for (int s = 0; s < 3; ++s) {
    for (int tactic = 0; tactic < 2; ++tactic) {
      const int64_t* shape = kShapes[s];
      int n = (int)(shape[0] * shape[1]);
      kop_tensor in[2];
      in[0] = tensor((void*)(uintptr_t)dx, KOP_FLOAT32, 2, shape);
      in[1] = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 2, shape);
      kop_tensor out = tensor((void*)(uintptr_t)dz, KOP_FLOAT32, 2, shape);
      memset(z, 0xFF, kMaxN * sizeof(float));
      CU(cu.cuMemcpyHtoD(dz, z, kMaxN * sizeof(float)));
      EXPECT_STATUS("pin the tactic", kop_op_pin_tactic(op, tactic), KOP_OK, NULL);
      snprintf(what, sizeof what, "launch axpy [%lld, %lld] with tactic '%s'", (long long)shape[0],
               (long long)shape[1], kop_op_tactic_name(op, tactic));
      EXPECT_STATUS(what, kop_op_launch(op, in, 2, &alpha, 1, &out, 1, NULL), KOP_OK, NULL);
      CU(cu.cuCtxSynchronize());
      CU(cu.cuMemcpyDtoH(z, dz, kMaxN * sizeof(float)));
      expect_axpy(z, -1.5f, x, y, n, kMaxN, what);
      snprintf(what, sizeof what, "out == -1.5 x + y for all %d elements and nothing past them", n);
      pass(what);
    }
  }
  kop_op_destroy(op);
  CU(cu.cuMemFree(dx));
  CU(cu.cuMemFree(dy));
  CU(cu.cuMemFree(dz));
  free(x);
  free(y);
  free(z);
  printf("PASSED: %d checks (cutedsl)\n", checks_passed);
  return 0;
}

/* cutile mode: the package of the cuTile example kop_cutile::scaled_add (out = a * alpha + b),
 * whose kernel takes each tensor as cuTile's calling convention passes an array (pointer, sizes,
 * strides) and was exported to CUBINs without PTX, run from C with no Python and no cuTile: ragged
 * sizes, and a misaligned input refused by the requirement the export's alignment assumption
 * became, a misaligned output buffer by the output's declared alignment.
 */
static int run_cutile(const char* path) {
  enum { kMaxN = 100003 };
  static const int64_t kSizes[4] = {100003, 1024, 1025, 1};
  cuda_driver cu;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int count = 0;
  CUdeviceptr da = 0, db = 0, dout = 0;
  float* a = malloc((kMaxN + 4) * sizeof(float));
  float* b = malloc(kMaxN * sizeof(float));
  float* out = malloc(kMaxN * sizeof(float));
  kop_op* op = NULL;
  char what[160];

  if (access(path, R_OK) != 0) skip("no cuTile package (scripts/stage-gpu builds it)");
  open_driver(&cu, lib, &count);
  if (!a || !b || !out) fail(__LINE__, "malloc", "out of memory");
  EXPECT_STATUS("kop_load_package (cuTile)", kop_load_package(path, &op), KOP_OK, NULL);
  CHECK(strcmp(kop_op_name(op), "kop_cutile::scaled_add") == 0, "the op's name");
  uint32_t state = 777u;
  for (int i = 0; i < kMaxN + 4; ++i) a[i] = next_value(&state);
  for (int i = 0; i < kMaxN; ++i) b[i] = next_value(&state);
  CU(cu.cuMemAlloc(&da, (kMaxN + 4) * sizeof(float)));
  CU(cu.cuMemAlloc(&db, kMaxN * sizeof(float)));
  CU(cu.cuMemAlloc(&dout, kMaxN * sizeof(float)));
  CU(cu.cuMemcpyHtoD(da, a, (kMaxN + 4) * sizeof(float)));
  CU(cu.cuMemcpyHtoD(db, b, kMaxN * sizeof(float)));
  kop_scalar alpha = float_scalar(0.75);
  for (int s = 0; s < 4; ++s) {
    const int64_t* shape = &kSizes[s];
    int n = (int)kSizes[s];
    kop_tensor in[2];
    in[0] = tensor((void*)(uintptr_t)da, KOP_FLOAT32, 1, shape);
    in[1] = tensor((void*)(uintptr_t)db, KOP_FLOAT32, 1, shape);
    kop_tensor o = tensor((void*)(uintptr_t)dout, KOP_FLOAT32, 1, shape);
    memset(out, 0xFF, kMaxN * sizeof(float));
    CU(cu.cuMemcpyHtoD(dout, out, kMaxN * sizeof(float)));
    snprintf(what, sizeof what, "launch scaled_add [%d]", n);
    EXPECT_STATUS(what, kop_op_launch(op, in, 2, &alpha, 1, &o, 1, NULL), KOP_OK, NULL);
    CU(cu.cuCtxSynchronize());
    CU(cu.cuMemcpyDtoH(out, dout, kMaxN * sizeof(float)));
    expect_axpy(out, 0.75f, a, b, n, kMaxN, what);
    snprintf(what, sizeof what, "out == a * 0.75 + b for all %d elements and nothing past them", n);
    pass(what);
  }
  /* a: one float past a 16-byte boundary, which the CUBIN was exported assuming never happens */
  kop_tensor in[2];
  in[0] = tensor((void*)(uintptr_t)(da + sizeof(float)), KOP_FLOAT32, 1, &kSizes[1]);
  in[1] = tensor((void*)(uintptr_t)db, KOP_FLOAT32, 1, &kSizes[1]);
  kop_tensor o = tensor((void*)(uintptr_t)dout, KOP_FLOAT32, 1, &kSizes[1]);
  EXPECT_STATUS("launch scaled_add on a misaligned input",
                kop_op_launch(op, in, 2, &alpha, 1, &o, 1, NULL), KOP_ERROR_LAUNCH,
                "aligned(a, 16)");
  /* the caller's output buffer likewise (its spec's "align": 16: the export assumed it) */
  in[0] = tensor((void*)(uintptr_t)da, KOP_FLOAT32, 1, &kSizes[1]);
  o = tensor((void*)(uintptr_t)(dout + sizeof(float)), KOP_FLOAT32, 1, &kSizes[1]);
  EXPECT_STATUS("launch scaled_add into a misaligned output",
                kop_op_launch(op, in, 2, &alpha, 1, &o, 1, NULL), KOP_ERROR_LAUNCH,
                "output 'out''s data pointer");
  kop_op_destroy(op);
  CU(cu.cuMemFree(da));
  CU(cu.cuMemFree(db));
  CU(cu.cuMemFree(dout));
  free(a);
  free(b);
  free(out);
  printf("PASSED: %d checks (cutile)\n", checks_passed);
  return 0;
}

/* autograd mode: kernelop_autograd::sigmoid's package carries its backward and double backward. */
static int run_autograd(const char* path, int gpu) {
  enum { kN = 1000 };
  kop_op *op = NULL, *bwd = NULL, *bwd2 = NULL, *none = NULL;
  EXPECT_STATUS("kop_load_package (with backward)", kop_load_package(path, &op), KOP_OK, NULL);
  EXPECT_STATUS("kop_op_backward", kop_op_backward(op, &bwd), KOP_OK, NULL);
  CHECK(strcmp(kop_op_schema(bwd),
               "kernelop_autograd::sigmoid_backward(Tensor y, Tensor grad_y) -> Tensor") == 0,
        "the backward's schema");
  EXPECT_STATUS("kop_op_backward of the backward", kop_op_backward(bwd, &bwd2), KOP_OK, NULL);
  CHECK(strcmp(kop_op_name(bwd2), "kernelop_autograd::sigmoid_backward_backward") == 0,
        "the double backward's name");
  CHECK(kop_op_num_outputs(bwd2) == 2, "the double backward returns two gradients");
  EXPECT_STATUS("the double backward has no backward", kop_op_backward(bwd2, &none), KOP_ERROR_SPEC,
                "has no backward (its spec declares none)");
  CHECK(none == NULL, "nothing is returned on failure");
  EXPECT_STATUS("a NULL op", kop_op_backward(NULL, &none), KOP_ERROR_ARGUMENT, NULL);
  if (gpu) {
    cuda_driver cu;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int count = 0;
    open_driver(&cu, lib, &count);
    float x[kN], y[kN], g[kN], gx[kN];
    uint32_t state = 99u;
    for (int i = 0; i < kN; ++i) {
      x[i] = next_value(&state) / 1000.0f;
      g[i] = next_value(&state) / 1000.0f;
    }
    CUdeviceptr dx = 0, dy = 0, dg = 0, dgx = 0;
    CU(cu.cuMemAlloc(&dx, sizeof x));
    CU(cu.cuMemAlloc(&dy, sizeof y));
    CU(cu.cuMemAlloc(&dg, sizeof g));
    CU(cu.cuMemAlloc(&dgx, sizeof gx));
    CU(cu.cuMemcpyHtoD(dx, x, sizeof x));
    CU(cu.cuMemcpyHtoD(dg, g, sizeof g));
    int64_t shape[1] = {kN};
    kop_tensor in = tensor((void*)(uintptr_t)dx, KOP_FLOAT32, 1, shape);
    kop_tensor out = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 1, shape);
    EXPECT_STATUS("launch sigmoid", kop_op_launch(op, &in, 1, NULL, 0, &out, 1, NULL), KOP_OK,
                  NULL);
    kop_tensor bin[2];
    bin[0] = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 1, shape);
    bin[1] = tensor((void*)(uintptr_t)dg, KOP_FLOAT32, 1, shape);
    kop_tensor bout = tensor((void*)(uintptr_t)dgx, KOP_FLOAT32, 1, shape);
    EXPECT_STATUS("launch sigmoid_backward", kop_op_launch(bwd, bin, 2, NULL, 0, &bout, 1, NULL),
                  KOP_OK, NULL);
    CU(cu.cuCtxSynchronize());
    CU(cu.cuMemcpyDtoH(y, dy, sizeof y));
    CU(cu.cuMemcpyDtoH(gx, dgx, sizeof gx));
    for (int i = 0; i < kN; ++i) {
      float s = 1.0f / (1.0f + expf(-x[i]));
      float want = g[i] * s * (1.0f - s);
      if (fabsf(y[i] - s) > 1e-6f || fabsf(gx[i] - want) > 1e-6f * (1.0f + fabsf(want))) {
        char detail[160];
        snprintf(detail, sizeof detail, "at %d: y %.9g (want %.9g), grad_x %.9g (want %.9g)", i,
                 y[i], s, gx[i], want);
        fail(__LINE__, "sigmoid and its backward", detail);
      }
    }
    pass("y == sigmoid(x) and grad_x == grad_y * y * (1 - y) for all 1000 elements");
    CU(cu.cuMemFree(dx));
    CU(cu.cuMemFree(dy));
    CU(cu.cuMemFree(dg));
    CU(cu.cuMemFree(dgx));
  }
  kop_op_destroy(bwd2);
  kop_op_destroy(bwd);
  kop_op_destroy(op);
  printf("PASSED: %d checks (autograd%s)\n", checks_passed, gpu ? " on the GPU" : "");
  return 0;
}

/* launches mode: kernelop_examples::colsum runs two kernels with scratch kernelop allocates; the
 * ABI sees one input and one output. */
static int run_launches(const char* path, int gpu) {
  enum { kRows = 1000, kCols = 37 };
  kop_op* op = NULL;
  EXPECT_STATUS("kop_load_package (two launches)", kop_load_package(path, &op), KOP_OK, NULL);
  CHECK(strcmp(kop_op_schema(op), "kernelop_examples::colsum(Tensor x) -> Tensor") == 0,
        "the schema has no scratch");
  CHECK(kop_op_num_outputs(op) == 1, "one output: the scratch is the launch's own");
  CHECK(kop_op_output_name(op, 1) == NULL, "no output 1");
  int64_t shape[2] = {kRows, kCols};
  kop_tensor in = tensor(NULL, KOP_FLOAT32, 2, shape);
  int32_t rank = 0, dtype = -1;
  int64_t dims[KOP_MAX_RANK];
  EXPECT_STATUS("kop_op_output_shapes",
                kop_op_output_shapes(op, &in, 1, NULL, 0, &rank, dims, &dtype), KOP_OK, NULL);
  CHECK(rank == 1 && dims[0] == kCols && dtype == KOP_FLOAT32, "y is float32 [cols]");
  if (gpu) {
    cuda_driver cu;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int count = 0;
    open_driver(&cu, lib, &count);
    static float x[kRows * kCols];
    float y[kCols];
    uint32_t state = 7u;
    for (int i = 0; i < kRows * kCols; ++i) x[i] = next_value(&state) / 1000.0f;
    CUdeviceptr dx = 0, dy = 0;
    CU(cu.cuMemAlloc(&dx, sizeof x));
    CU(cu.cuMemAlloc(&dy, sizeof y));
    CU(cu.cuMemcpyHtoD(dx, x, sizeof x));
    in = tensor((void*)(uintptr_t)dx, KOP_FLOAT32, 2, shape);
    int64_t out_shape[1] = {kCols};
    kop_tensor out = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 1, out_shape);
    EXPECT_STATUS("launch colsum", kop_op_launch(op, &in, 1, NULL, 0, &out, 1, NULL), KOP_OK, NULL);
    CU(cu.cuCtxSynchronize());
    CU(cu.cuMemcpyDtoH(y, dy, sizeof y));
    for (int c = 0; c < kCols; ++c) {
      double want = 0;
      for (int r = 0; r < kRows; ++r) want += x[r * kCols + c];
      if (fabs(y[c] - want) > 1e-3 * (1.0 + fabs(want))) {
        char detail[120];
        snprintf(detail, sizeof detail, "column %d: %.9g, want %.9g", c, y[c], want);
        fail(__LINE__, "colsum", detail);
      }
    }
    pass("y == x.sum(0) for a 1000 x 37 matrix");
    CU(cu.cuMemFree(dx));
    CU(cu.cuMemFree(dy));
  }
  kop_op_destroy(op);
  printf("PASSED: %d checks (launches%s)\n", checks_passed, gpu ? " on the GPU" : "");
  return 0;
}

static int run_views(const char* path, int gpu) {
  enum { kRows = 3, kCols = 70 };
  kop_op* op = NULL;
  EXPECT_STATUS("kop_load_package (returned view)", kop_load_package(path, &op), KOP_OK, NULL);
  int32_t perm[4] = {-1, -1, -1, -1};
  CHECK(kop_op_output_permute(op, 0, perm, 4) == 2 && perm[0] == 1 && perm[1] == 0 && perm[2] == -1,
        "output 0 is returned as permute(1, 0)");
  CHECK(kop_op_output_permute(op, 0, perm, 1) == -1 && kop_last_status() == KOP_ERROR_ARGUMENT &&
            strstr(kop_last_error(), "perm must hold 2, got capacity 1") != NULL,
        "a perm of capacity 1 is refused, saying 2 are needed");
  CHECK(kop_op_output_permute(op, 0, NULL, 4) == -1, "a NULL perm is refused");
  CHECK(kop_op_output_permute(op, 1, perm, 4) == -1 &&
            kop_op_output_permute(op, -1, perm, 4) == -1 &&
            kop_op_output_permute(NULL, 0, perm, 4) == -1,
        "an output out of range and a NULL op are refused");
  int64_t shape[2] = {kRows, kCols};
  kop_tensor in = tensor(NULL, KOP_FLOAT32, 2, shape);
  int32_t rank = 0, dtype = -1;
  int64_t dims[KOP_MAX_RANK];
  EXPECT_STATUS("kop_op_output_shapes (returned view)",
                kop_op_output_shapes(op, &in, 1, NULL, 0, &rank, dims, &dtype), KOP_OK, NULL);
  CHECK(rank == 2 && dims[0] == kRows && dims[1] == kCols,
        "the output's shape is the declared one, as the launch writes it");
  if (gpu) {
    cuda_driver cu;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int count = 0;
    open_driver(&cu, lib, &count);
    float x[kRows * kCols], y[kRows * kCols];
    for (int i = 0; i < kRows * kCols; ++i) x[i] = (float)i;
    CUdeviceptr dx = 0, dy = 0;
    CU(cu.cuMemAlloc(&dx, sizeof x));
    CU(cu.cuMemAlloc(&dy, sizeof y));
    CU(cu.cuMemcpyHtoD(dx, x, sizeof x));
    in = tensor((void*)(uintptr_t)dx, KOP_FLOAT32, 2, shape);
    kop_tensor out = tensor((void*)(uintptr_t)dy, KOP_FLOAT32, 2, shape);
    EXPECT_STATUS("kop_op_launch (returned view)",
                  kop_op_launch(op, &in, 1, NULL, 0, &out, 1, NULL), KOP_OK, NULL);
    CU(cu.cuMemcpyDtoH(y, dy, sizeof y));
    int same = 1;
    /* Element (c, r) of the returned view is element (r, c) of what was written. */
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c) same &= y[r * kCols + c] == x[r * kCols + c];
    CHECK(same,
          "the launch wrote the declared shape, contiguous; the caller applies the permutation");
    CU(cu.cuMemFree(dx));
    CU(cu.cuMemFree(dy));
  }
  kop_op_destroy(op);
  printf("PASSED: %d checks (views%s)\n", checks_passed, gpu ? " on the GPU" : "");
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 3 || (strcmp(argv[2], "cpu") != 0 && strcmp(argv[2], "gpu") != 0 &&
                    strcmp(argv[2], "triton") != 0 && strcmp(argv[2], "cutedsl") != 0 &&
                    strcmp(argv[2], "cutile") != 0 && strcmp(argv[2], "autograd") != 0 &&
                    strcmp(argv[2], "autograd_gpu") != 0 && strcmp(argv[2], "launches") != 0 &&
                    strcmp(argv[2], "launches_gpu") != 0 && strcmp(argv[2], "views") != 0 &&
                    strcmp(argv[2], "views_gpu") != 0)) {
    fprintf(stderr,
            "usage: %s PACKAGE.kop cpu|gpu|triton|cutedsl|cutile|autograd|autograd_gpu|launches|"
            "launches_gpu|views|views_gpu\n",
            argc > 0 ? argv[0] : "c_api_test");
    return 2;
  }
  if (strcmp(argv[2], "triton") == 0) return run_triton(argv[1]);
  if (strcmp(argv[2], "cutedsl") == 0) return run_cutedsl(argv[1]);
  if (strcmp(argv[2], "cutile") == 0) return run_cutile(argv[1]);
  if (strncmp(argv[2], "autograd", 8) == 0) return run_autograd(argv[1], argv[2][8] != 0);
  if (strncmp(argv[2], "launches", 8) == 0) return run_launches(argv[1], argv[2][8] != 0);
  if (strncmp(argv[2], "views", 5) == 0) return run_views(argv[1], argv[2][5] != 0);
  return strcmp(argv[2], "cpu") == 0 ? run_cpu(argv[1]) : run_gpu(argv[1]);
}
