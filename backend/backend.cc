#include "backend/backend.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "common/enum_names.h"

namespace paratune::backend {

namespace {

// By value, in the order of each enum's declaration (backend.h).
constexpr int kDataTypeBytes[] = {1, 2, 2, 4, 8, 1};
constexpr const char* kDataTypeNames[] = {"int8", "half", "bfloat16", "float", "double", "f8e4m3"};
static_assert(std::size(kDataTypeBytes) == kNumDataTypes);
static_assert(std::size(kDataTypeNames) == kNumDataTypes);

constexpr const char* kReduceOpNames[] = {"sum", "prod", "max", "min", "avg"};

constexpr const char* kGemmPrecisionNames[] = {"fp32", "tf32", "bf16", "fp16", "fp8"};
constexpr int kGemmInputBytes[] = {4, 4, 2, 2, 1};
constexpr int kGemmOutputBytes[] = {4, 4, 2, 2, 2};
static_assert(std::size(kGemmPrecisionNames) == kNumGemmPrecisions);
static_assert(std::size(kGemmInputBytes) == kNumGemmPrecisions);
static_assert(std::size(kGemmOutputBytes) == kNumGemmPrecisions);

constexpr const char* kOpKindNames[] = {
    "all_reduce", "all_gather",  "reduce_scatter", "alltoall",       "sendrecv",     "gemm",
    "copy",       "allocate",    "free",           "split_comm",     "destroy_comm", "record_event",
    "wait_event", "synchronize", "hold_streams",   "release_streams", "conv"};
static_assert(std::size(kOpKindNames) == EnumIndex(OpKind::kConv) + 1);

constexpr const char* kConvPassNames[] = {"fwd", "dgrad", "wgrad"};
static_assert(std::size(kConvPassNames) == EnumIndex(ConvPass::kWeightGrad) + 1);

// Whether `b` holds `bytes` (a backend without memory checks the view's length only).
Status CheckConvBuffer(const Buffer& b, int64_t bytes, bool allocated, const char* what) {
  if (!b.valid() || b.bytes < bytes || (allocated && b.data == nullptr)) {
    return Status::InvalidArgument(std::string("convolution ") + what + " buffer holds " +
                                   std::to_string(b.bytes) + " bytes; the pass needs " +
                                   std::to_string(bytes));
  }
  return Status::Ok();
}

}  // namespace

int DataTypeBytes(DataType t) { return EnumLookup(t, kDataTypeBytes, 0); }

const char* DataTypeName(DataType t) { return EnumName(t, kDataTypeNames); }

Result<DataType> ParseDataType(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "int8") return DataType::kInt8;
  if (n == "half" || n == "fp16" || n == "float16") return DataType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DataType::kBFloat16;
  if (n == "float" || n == "fp32" || n == "float32") return DataType::kFloat32;
  if (n == "double" || n == "fp64" || n == "float64") return DataType::kFloat64;
  if (n == "f8e4m3" || n == "fp8") return DataType::kFp8E4M3;
  return Status::InvalidArgument("unknown data type '" + name + "' (" +
                                 EnumNameList(kDataTypeNames) + ")");
}

const char* ReduceOpName(ReduceOp op) { return EnumName(op, kReduceOpNames); }

const char* GemmPrecisionName(GemmPrecision p) { return EnumName(p, kGemmPrecisionNames); }

Result<GemmPrecision> ParseGemmPrecision(const std::string& name) {
  if (auto p = EnumFromName<GemmPrecision>(name, kGemmPrecisionNames)) return *p;
  return Status::InvalidArgument("unknown GEMM precision '" + name + "' (" +
                                 EnumNameList(kGemmPrecisionNames) + ")");
}

int GemmInputBytes(GemmPrecision p) { return EnumLookup(p, kGemmInputBytes, 0); }

int GemmOutputBytes(GemmPrecision p) { return EnumLookup(p, kGemmOutputBytes, 0); }

const char* OpKindName(OpKind k) { return EnumName(k, kOpKindNames); }

const char* ConvPassName(ConvPass p) { return EnumName(p, kConvPassNames); }

int64_t ConvOutExtent(const ConvArgs& a, int i) {
  if (i >= a.dims) return 1;
  return (a.extent[static_cast<size_t>(i)] - 1) / a.stride + 1;
}

namespace {
int64_t Positions(const ConvArgs& a, bool out) {
  int64_t p = 1;
  for (int i = 0; i < a.dims; ++i) p *= out ? ConvOutExtent(a, i) : a.extent[static_cast<size_t>(i)];
  return p;
}
int64_t KernelVolume(const ConvArgs& a) {
  int64_t v = 1;
  for (int i = 0; i < a.dims; ++i) v *= a.kernel;
  return v;
}
}  // namespace

int64_t ConvInputElems(const ConvArgs& a) { return a.n * Positions(a, false) * a.c; }

int64_t ConvFilterElems(const ConvArgs& a) { return a.k * KernelVolume(a) * (a.c / a.groups); }

int64_t ConvOutputElems(const ConvArgs& a) { return a.n * Positions(a, true) * a.k; }

int64_t ConvPatchBytesPerSample(const ConvArgs& a) {
  return Positions(a, true) * KernelVolume(a) * a.c * GemmInputBytes(a.precision);
}

double ConvFlops(const ConvArgs& a) {
  return 2.0 * static_cast<double>(ConvOutputElems(a)) * static_cast<double>(KernelVolume(a)) *
         static_cast<double>(a.c / a.groups);
}

Status CheckConvArgs(const ConvArgs& a, bool allocated) {
  if (a.dims < 1 || a.dims > 3) return Status::InvalidArgument("convolution dims must be 1, 2 or 3");
  if (a.n < 1 || a.c < 1 || a.k < 1 || a.kernel < 1 || a.stride < 1 || a.groups < 1) {
    return Status::InvalidArgument("convolution sizes must be >= 1");
  }
  for (int i = 0; i < a.dims; ++i) {
    if (a.extent[static_cast<size_t>(i)] < 1) return Status::InvalidArgument("convolution extent must be >= 1");
  }
  if (a.c % a.groups != 0 || a.k % a.groups != 0) {
    return Status::InvalidArgument("convolution groups must divide the input and output channels");
  }
  if (a.precision == GemmPrecision::kFp8) {
    return Status::Unavailable("convolutions run in fp32, tf32, bf16 or fp16, not fp8");
  }
  const int64_t e = GemmInputBytes(a.precision);
  PT_RETURN_IF_ERROR(CheckConvBuffer(a.x, ConvInputElems(a) * e, allocated, "x"));
  PT_RETURN_IF_ERROR(CheckConvBuffer(a.w, ConvFilterElems(a) * e, allocated, "w"));
  PT_RETURN_IF_ERROR(CheckConvBuffer(a.y, ConvOutputElems(a) * e, allocated, "y"));
  return CheckConvBuffer(a.workspace, ConvPatchBytesPerSample(a), allocated, "workspace");
}

Status CheckIsCollective(OpKind kind) {
  if (EnumIndex(kind) <= EnumIndex(OpKind::kSendRecv)) return Status::Ok();
  return Status::InvalidArgument(std::string(OpKindName(kind)) + " is not a collective");
}

Buffer Slice(const Buffer& b, int64_t offset_bytes, int64_t bytes) {
  PT_CHECK_MSG(offset_bytes >= 0 && bytes >= 0 && offset_bytes + bytes <= b.bytes,
               "slice outside its buffer");
  Buffer s = b;
  s.offset_bytes = b.offset_bytes + offset_bytes;
  s.bytes = bytes;
  s.data = b.data ? static_cast<char*>(b.data) + offset_bytes : nullptr;
  return s;
}

bool IsOutOfMemory(const Status& s) {
  return !s.ok() && s.message().find(kOutOfMemoryPhrase) != std::string::npos;
}

Status OutOfMemory(int64_t requested_bytes, int64_t free_bytes, const std::string& where) {
  return Status::Unavailable(std::string(kOutOfMemoryPhrase) + " on " + where + ": requested " +
                             std::to_string(requested_bytes) + " bytes, " +
                             std::to_string(free_bytes) + " bytes free");
}

}  // namespace paratune::backend
