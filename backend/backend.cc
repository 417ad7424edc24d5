#include "backend/backend.h"

#include <algorithm>
#include <cctype>

namespace paratune::backend {

int DataTypeBytes(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return 1;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFp8E4M3:
      return 1;
  }
  return 0;
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return "int8";
    case DataType::kFloat16:
      return "half";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat64:
      return "double";
    case DataType::kFp8E4M3:
      return "f8e4m3";
  }
  return "?";
}

Result<DataType> ParseDataType(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "int8") return DataType::kInt8;
  if (n == "half" || n == "fp16" || n == "float16") return DataType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DataType::kBFloat16;
  if (n == "float" || n == "fp32" || n == "float32") return DataType::kFloat32;
  if (n == "double" || n == "fp64" || n == "float64") return DataType::kFloat64;
  if (n == "f8e4m3" || n == "fp8") return DataType::kFp8E4M3;
  return Status::InvalidArgument("unknown data type '" + name +
                                 "' (int8, half, bfloat16, float, double, f8e4m3)");
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "?";
}

const char* GemmPrecisionName(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32:
      return "fp32";
    case GemmPrecision::kTf32:
      return "tf32";
    case GemmPrecision::kBf16:
      return "bf16";
    case GemmPrecision::kFp16:
      return "fp16";
    case GemmPrecision::kFp8:
      return "fp8";
  }
  return "?";
}

Result<GemmPrecision> ParseGemmPrecision(const std::string& name) {
  for (int i = 0; i < kNumGemmPrecisions; ++i) {
    auto p = static_cast<GemmPrecision>(i);
    if (name == GemmPrecisionName(p)) return p;
  }
  return Status::InvalidArgument("unknown GEMM precision '" + name +
                                 "' (fp32, tf32, bf16, fp16, fp8)");
}

int GemmInputBytes(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32:
    case GemmPrecision::kTf32:
      return 4;
    case GemmPrecision::kBf16:
    case GemmPrecision::kFp16:
      return 2;
    case GemmPrecision::kFp8:
      return 1;
  }
  return 0;
}

int GemmOutputBytes(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kFp32:
    case GemmPrecision::kTf32:
      return 4;
    case GemmPrecision::kBf16:
    case GemmPrecision::kFp16:
    case GemmPrecision::kFp8:
      return 2;
  }
  return 0;
}

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kAllReduce:
      return "all_reduce";
    case OpKind::kAllGather:
      return "all_gather";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllToAll:
      return "alltoall";
    case OpKind::kSendRecv:
      return "sendrecv";
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kCopy:
      return "copy";
    case OpKind::kAllocate:
      return "allocate";
    case OpKind::kFree:
      return "free";
    case OpKind::kSplitComm:
      return "split_comm";
    case OpKind::kDestroyComm:
      return "destroy_comm";
    case OpKind::kRecordEvent:
      return "record_event";
    case OpKind::kWaitEvent:
      return "wait_event";
    case OpKind::kSynchronize:
      return "synchronize";
    case OpKind::kHoldStreams:
      return "hold_streams";
    case OpKind::kReleaseStreams:
      return "release_streams";
  }
  return "?";
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
