/* The C ABI of the kernelop runtime: load a .kop package, ask for output shapes, launch on a
 * stream. For embedding in any engine's plugin mechanism (see docs/c-api.md). No exception
 * crosses it: every function returns a status, and kop_last_error() says what went wrong on
 * the calling thread. All functions are thread-safe; a kop_op may be used from many threads. */
/* NOLINTBEGIN: a C header (typedefs, C names), outside clang-tidy's C++ style. */
#ifndef KERNELOP_C_API_H_
#define KERNELOP_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KOP_ABI_VERSION 2
#define KOP_MAX_RANK 16

/* Status codes. */
typedef enum kop_status {
  KOP_OK = 0,
  KOP_ERROR_SPEC = 1,    /* invalid spec */
  KOP_ERROR_TYPE = 2,    /* an argument of the wrong type, dtype or count */
  KOP_ERROR_COMPILE = 3, /* not produced by the runtime */
  KOP_ERROR_CACHE = 4,   /* not produced by the runtime */
  KOP_ERROR_LAUNCH = 5,  /* a launch-time check or a CUDA driver call failed */
  KOP_ERROR_IO = 6,      /* a file could not be read */
  KOP_ERROR_FORMAT = 7,  /* a malformed or damaged package */
  KOP_ERROR_INTERNAL = 8,
  KOP_ERROR_ARGUMENT = 9 /* a null pointer or bad count passed to this API */
} kop_status;

/* Element types, numbered as kernelop::DType. */
typedef enum kop_dtype {
  KOP_FLOAT32 = 0,
  KOP_FLOAT16 = 1,
  KOP_BFLOAT16 = 2,
  KOP_FLOAT64 = 3,
  KOP_FLOAT8_E4M3FN = 4,
  KOP_FLOAT8_E5M2 = 5,
  KOP_INT8 = 6,
  KOP_UINT8 = 7,
  KOP_INT16 = 8,
  KOP_INT32 = 9,
  KOP_INT64 = 10,
  KOP_BOOL = 11
} kop_dtype;

/* A tensor in device memory. strides (in elements) may be NULL for contiguous. */
typedef struct kop_tensor {
  void* data;
  int32_t dtype; /* kop_dtype */
  int32_t device;
  int32_t rank;
  const int64_t* shape;
  const int64_t* strides;
} kop_tensor;

typedef enum kop_scalar_kind {
  KOP_SCALAR_FLOAT = 0,
  KOP_SCALAR_INT = 1,
  KOP_SCALAR_BOOL = 2
} kop_scalar_kind;

typedef struct kop_scalar {
  int32_t kind; /* kop_scalar_kind */
  double f;
  int64_t i; /* also the bool, as 0 or 1 */
} kop_scalar;

typedef struct kop_op kop_op;

/* Loading and lifetime. */
kop_status kop_load_package(const char* path, kop_op** out);
kop_status kop_load_package_memory(const void* data, size_t size, kop_op** out);
void kop_op_destroy(kop_op* op);
/* The backward of an op whose package carries one (docs/autograd.md): a new op, destroyed
 * separately, whose inputs are what its schema names (forward inputs, outputs, and grad_<output>,
 * the gradients flowing in) and whose outputs are grad_<input>; it may have a backward in turn.
 * KOP_ERROR_SPEC when the op has none. */
kop_status kop_op_backward(const kop_op* op, kop_op** out);

/* Introspection (strings live as long as the op). */
const char* kop_op_name(const kop_op* op);
const char* kop_op_schema(const kop_op* op);
int32_t kop_op_num_inputs(const kop_op* op); /* tensor inputs */
int32_t kop_op_num_scalars(const kop_op* op);
int32_t kop_op_num_outputs(const kop_op* op);
const char* kop_op_input_name(const kop_op* op, int32_t index);
const char* kop_op_output_name(const kop_op* op, int32_t index);
/* How the op returns output `index` (Note [returned views], since ABI 2): 0 when as written (perm
 * may then be NULL); else its rank n, with perm[0..n) the permutation (dim k of the result is dim
 * perm[k] of what the launches write, contiguous, of the declared shape kop_op_output_shapes
 * gives). -1 on a bad argument (a NULL op, an index out of range, a NULL perm or a capacity below
 * n for a permuted output): see kop_last_error(). */
int32_t kop_op_output_permute(const kop_op* op, int32_t index, int32_t* perm, int32_t capacity);

/* Output shapes and dtypes for the given inputs: ranks[num_outputs], dtypes[num_outputs] and
 * shapes[num_outputs * KOP_MAX_RANK] (row o holds output o's dims). */
kop_status kop_op_output_shapes(const kop_op* op, const kop_tensor* inputs, int32_t num_inputs,
                                const kop_scalar* scalars, int32_t num_scalars, int32_t* ranks,
                                int64_t* shapes, int32_t* dtypes);

/* Launches on `stream` (a CUstream, or NULL) into caller-allocated outputs. */
kop_status kop_op_launch(const kop_op* op, const kop_tensor* inputs, int32_t num_inputs,
                         const kop_scalar* scalars, int32_t num_scalars, const kop_tensor* outputs,
                         int32_t num_outputs, void* stream);

/* Tactics: a tuned op has one per config, id = the config's index (stable across processes, as
 * a TensorRT plugin's tactic); an untuned op has one, id 0. A launch chooses: the pinned tactic,
 * else the tuning table (the package's, then the one on disk), else it times the eligible
 * configs on `stream` (never while the stream captures a graph), else the first eligible. */
int32_t kop_op_num_tactics(const kop_op* op);
const char* kop_op_tactic_name(const kop_op* op, int32_t tactic); /* "BLOCK=256, VEC=4" */
kop_status kop_op_pin_tactic(kop_op* op, int32_t tactic);         /* -1 unpins */
int32_t kop_op_pinned_tactic(const kop_op* op);                   /* -1: none */
int32_t kop_op_last_tactic(const kop_op* op);                     /* -1: no launch yet */
/* Timing runs made to tune (warm-ups included), keys tuned, launches served by a table. */
kop_status kop_op_tuning_stats(const kop_op* op, uint64_t* timed_runs, uint64_t* tunings,
                               uint64_t* table_hits);

/* The message of the last failed call on this thread ("" when none). */
const char* kop_last_error(void);
kop_status kop_last_status(void);
int32_t kop_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* KERNELOP_C_API_H_ */
/* NOLINTEND */
