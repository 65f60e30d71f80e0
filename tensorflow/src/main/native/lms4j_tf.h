/*
 * lms4j: the few declarations of TensorFlow's public C API (c_api.h, tf_tensor.h, tf_status.h,
 * kernels.h, ops.h) that the native swap ops use, written from the documented API. Functions are
 * resolved at load time from libtensorflow_framework.so.2, which TensorFlow Java has loaded.
 */
#ifndef LMS4J_TF_H_
#define LMS4J_TF_H_

#include <stddef.h>
#include <stdint.h>

typedef struct TF_Status TF_Status;
typedef struct TF_Tensor TF_Tensor;
typedef struct TF_KernelBuilder TF_KernelBuilder;
typedef struct TF_OpKernelConstruction TF_OpKernelConstruction;
typedef struct TF_OpKernelContext TF_OpKernelContext;
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_ShapeInferenceContext TF_ShapeInferenceContext;
typedef struct TF_ShapeHandle TF_ShapeHandle;

/* TF_DataType values (types.proto) */
typedef int TF_DataType;
/* TF_Code values (error_codes.proto) */
typedef int TF_Code;
#define LMS4J_TF_OK 0
#define LMS4J_TF_INVALID_ARGUMENT 3
#define LMS4J_TF_RESOURCE_EXHAUSTED 8
#define LMS4J_TF_INTERNAL 13
#define LMS4J_TF_DATA_LOSS 15
#define LMS4J_TF_INT64 9

TF_Status* TF_NewStatus(void);
void TF_DeleteStatus(TF_Status* s);
void TF_SetStatus(TF_Status* s, TF_Code code, const char* msg);
TF_Code TF_GetCode(const TF_Status* s);
const char* TF_Message(const TF_Status* s);

TF_Tensor* TF_NewTensor(TF_DataType dtype, const int64_t* dims, int num_dims, void* data,
    size_t len, void (*deallocator)(void* data, size_t len, void* arg), void* deallocator_arg);
void TF_DeleteTensor(TF_Tensor* t);
TF_DataType TF_TensorType(const TF_Tensor* t);
int TF_NumDims(const TF_Tensor* t);
int64_t TF_Dim(const TF_Tensor* t, int dim_index);
size_t TF_TensorByteSize(const TF_Tensor* t);
void* TF_TensorData(const TF_Tensor* t);

TF_KernelBuilder* TF_NewKernelBuilder(const char* op_name, const char* device_name,
    void* (*create_func)(TF_OpKernelConstruction*),
    void (*compute_func)(void*, TF_OpKernelContext*),
    void (*delete_func)(void*));
void TF_RegisterKernelBuilder(const char* kernel_name, TF_KernelBuilder* builder,
    TF_Status* status);

void TF_OpKernelConstruction_GetAttrType(TF_OpKernelConstruction* ctx, const char* attr_name,
    TF_DataType* val, TF_Status* status);
void TF_OpKernelConstruction_GetAttrSize(TF_OpKernelConstruction* ctx, const char* attr_name,
    int32_t* list_size, int32_t* total_size, TF_Status* status);
void TF_OpKernelConstruction_GetAttrString(TF_OpKernelConstruction* ctx, const char* attr_name,
    char* val, size_t max_length, TF_Status* status);
void TF_OpKernelConstruction_GetAttrBool(TF_OpKernelConstruction* ctx, const char* attr_name,
    unsigned char* val, TF_Status* status);
void TF_OpKernelConstruction_Failure(TF_OpKernelConstruction* ctx, TF_Status* status);

void TF_GetInput(TF_OpKernelContext* ctx, int i, TF_Tensor** tensor, TF_Status* status);
void TF_SetOutput(TF_OpKernelContext* ctx, int i, const TF_Tensor* tensor, TF_Status* status);
TF_Tensor* TF_AllocateOutput(TF_OpKernelContext* context, int index, TF_DataType dtype,
    const int64_t* dims, int num_dims, size_t len, TF_Status* status);
void TF_OpKernelContext_Failure(TF_OpKernelContext* ctx, TF_Status* status);

TF_OpDefinitionBuilder* TF_NewOpDefinitionBuilder(const char* op_name);
void TF_RegisterOpDefinition(TF_OpDefinitionBuilder* builder, TF_Status* status);
void TF_OpDefinitionBuilderAddInput(TF_OpDefinitionBuilder* builder, const char* input_spec);
void TF_OpDefinitionBuilderAddOutput(TF_OpDefinitionBuilder* builder, const char* output_spec);
void TF_OpDefinitionBuilderAddAttr(TF_OpDefinitionBuilder* builder, const char* attr_spec);
void TF_OpDefinitionBuilderSetIsStateful(TF_OpDefinitionBuilder* builder, _Bool is_stateful);
void TF_OpDefinitionBuilderSetShapeInferenceFunction(TF_OpDefinitionBuilder* builder,
    void (*shape_inference_func)(TF_ShapeInferenceContext* ctx, TF_Status* status));

TF_ShapeHandle* TF_NewShapeHandle(void);
void TF_DeleteShapeHandle(TF_ShapeHandle* handle);
void TF_ShapeInferenceContextGetInput(TF_ShapeInferenceContext* ctx, int i,
    TF_ShapeHandle* handle, TF_Status* status);
void TF_ShapeInferenceContextSetOutput(TF_ShapeInferenceContext* ctx, int i,
    TF_ShapeHandle* handle, TF_Status* status);
void TF_ShapeInferenceContextSetUnknownShape(TF_ShapeInferenceContext* ctx, TF_Status* status);
TF_ShapeHandle* TF_ShapeInferenceContextScalar(TF_ShapeInferenceContext* ctx);
TF_ShapeHandle* TF_ShapeInferenceContextVectorFromSize(TF_ShapeInferenceContext* ctx,
    size_t size);

#endif
