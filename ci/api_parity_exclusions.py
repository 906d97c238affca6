"""PyTorch public names ember deliberately does not provide, per namespace, each with its reason.

``ci/api_parity.py`` reports coverage over PyTorch's names minus these. A name belongs here only
when providing it would be wrong or meaningless for ember (a TorchScript or vendor-library
internal, a quantized/sub-byte dtype with no kernels, a name PyTorch itself only keeps to raise a
"removed" error) or when another issue owns it (symbolic shapes: compile/export; sparse-only
products: the sparse issue). Commonly used names are implemented, never listed here.
"""

from __future__ import annotations

_TORCHSCRIPT = ("TorchScript/JIT C++ internals: ember has no TorchScript interpreter (ember.jit traces into "
                "ember's own graphs)")
_QUANT = "quantized tensors: ember has no quantized dtypes or quantization backend"
_VENDOR = ("vendor-library entry points (cuDNN, MIOpen, MKLDNN, FBGEMM, Vulkan, IPU/XLA autocast): ember reaches "
           "its kernels through the generic ops")
_SUBBYTE = ("dtypes with no kernels in ember (sub-byte, float8/float4, complex32, bits, wide unsigned): "
            "PyTorch itself supports only a handful of ops on them")
_SYM = "symbolic shapes: owned by the compile/export issue (ember traces with concrete sizes)"
_SPARSE = "sparse-only products and accessors: owned by the sparse-layout issue (19)"
_REMOVED = "removed in PyTorch 2: PyTorch only keeps the name to raise an error pointing at torch.linalg"
_SYNCBN = "the per-process kernels behind SyncBatchNorm: owned by the distributed issue"
_INTERNAL = "PyTorch-internal helper that happens to be importable (no public documentation, no program use)"
_DOC = "docstring template or typing helper of PyTorch's own source, not an API"
_REEXPORT = "an import inside PyTorch's module (not part of that namespace's API)"
_PROFILER = "bindings and enums of the C++ (kineto) profiler, which ember does not have"
_DATAPIPES = "torchdata DataPipes: deprecated by PyTorch (2.x warns they will be removed) and not carried over"
_AOT_TENSOR_PARALLEL = "fp8/grouped GEMM entry points for CUDA tensor cores (the CUDA issue)"
_TORCH_FUNCTION = ("the __torch_function__ helpers PyTorch re-imports here: they live in ember.overrides, whose "
                   "import switches the protocol on (docs/deviations.md), so other namespaces do not import it")
_OVERRIDES = ("ember.overrides exists but is not an attribute until imported: importing it switches the "
              "__torch_function__ protocol on for the process (docs/deviations.md)")
_LEGACY = "legacy (Lua-Torch era) or deprecated name that PyTorch keeps for old checkpoints only"


_NEW_213 = ("new in PyTorch 2.13 and not yet used by programs; left for a later session (NOTES.md of "
            "ember-tensor-core, session 20)")
_COMPILE_ONLY = "configures torch.compile's partitioner / CUDA-graph capture: owned by the compile and CUDA issues"
_TEST_ONLY = "PyTorch's own test-suite table (a lambda per overridable function), not used by programs"


def _names(text: str) -> list[str]:
    return text.split()


_GROUPS = {
    "torch": [
        (_TORCHSCRIPT, _names("""
            AliasDb AnyType Argument ArgumentSpec AwaitType Block BoolType BufferDict CallStack Capsule ClassType Code
            CompilationUnit CompleteArgumentSpec ComplexType ConcreteModuleType ConcreteModuleTypeBuilder
            DeepCopyMemoTable DeserializationStorageContext DeviceObjType DictType EnumType ErrorReport ExecutionPlan
            FileCheck FloatType FunctionSchema Future FutureType Gradient Graph GraphExecutorState IODescriptor
            InferredType IntType InterfaceType JITException ListType LiteScriptModule LockingLogger LoggerBase
            ModuleDict Node NoneType NoopLogger NumberType OperatorInfo OptionalType ParameterDict PyObjectType
            PyTorchFileReader PyTorchFileWriter RRefType ScriptClass ScriptClassFunction ScriptDict ScriptDictIterator
            ScriptDictKeyIterator ScriptFunction ScriptList ScriptListIterator ScriptMethod ScriptModule
            ScriptModuleSerializer ScriptObject ScriptObjectProperty SerializationStorageContext StaticModule
            StreamObjType StringType SymBoolType SymIntType TensorType TracingState TupleType UnionType Use Value
            fork wait import_ir_module import_ir_module_from_buffer merge_type_from_type_comment parse_ir parse_schema
            parse_type_comment unify_type_list AggregationType BenchmarkConfig BenchmarkExecutionStats
            ThroughputBenchmark DispatchKey DispatchKeySet ExcludeDispatchKeyGuard Tag FatalError AVG SUM
            PRIVATE_OPS classes monitor package cpp""")),
        (_REEXPORT, _names("glob")),
        (_QUANT, _names("""
            QInt32Storage QInt8Storage QUInt2x4Storage QUInt4x2Storage QUInt8Storage qscheme qint32 qint8 quint2x4
            quint4x2 quint8 per_channel_affine per_channel_affine_float_qparams per_channel_symmetric
            per_tensor_affine per_tensor_symmetric choose_qparams_optimized dequantize empty_quantized
            fake_quantize_per_channel_affine fake_quantize_per_tensor_affine fused_moving_avg_obs_fake_quant
            int_repr q_per_channel_axis q_per_channel_scales q_per_channel_zero_points q_scale q_zero_point
            quantize_per_channel quantize_per_tensor quantize_per_tensor_dynamic quantized_batch_norm quantized_gru
            quantized_gru_cell quantized_lstm quantized_lstm_cell quantized_max_pool1d quantized_max_pool2d
            quantized_max_pool3d quantized_rnn_relu_cell quantized_rnn_tanh_cell ao quantization""")),
        (_VENDOR, _names("""
            cudnn_affine_grid_generator cudnn_batch_norm cudnn_convolution cudnn_convolution_add_relu
            cudnn_convolution_relu cudnn_convolution_transpose cudnn_grid_sampler cudnn_is_acceptable
            miopen_batch_norm miopen_convolution miopen_convolution_add_relu miopen_convolution_relu
            miopen_convolution_transpose miopen_ctc_loss miopen_depthwise_convolution miopen_rnn
            mkldnn_adaptive_avg_pool2d mkldnn_convolution mkldnn_linear_backward_weights mkldnn_max_pool2d
            mkldnn_max_pool3d mkldnn_rnn_layer fbgemm_linear_fp16_weight fbgemm_linear_fp16_weight_fp32_activation
            fbgemm_linear_int8_weight fbgemm_linear_int8_weight_fp32_activation fbgemm_linear_quantize_weight
            fbgemm_pack_gemm_matrix_fp16 fbgemm_pack_quantized_matrix is_vulkan_available get_autocast_ipu_dtype
            get_autocast_xla_dtype is_autocast_ipu_enabled is_autocast_xla_enabled set_autocast_ipu_dtype
            set_autocast_ipu_enabled set_autocast_xla_dtype set_autocast_xla_enabled""")),
        (_SUBBYTE, _names("""
            bit bits16 bits1x8 bits2x4 bits4x2 bits8 chalf complex32 float4_e2m1fn_x2 float8_e4m3fn float8_e4m3fnuz
            float8_e5m2 float8_e5m2fnuz float8_e8m0fnu int1 int2 int3 int4 int5 int6 int7 uint1 uint2 uint3 uint4
            uint5 uint6 uint7 uint16 uint32 uint64""")),
        (_SYM, _names("""
            SymBool SymFloat SymInt sym_constrain_range sym_constrain_range_for_size sym_float sym_fresh_size sym_int
            sym_ite sym_max sym_min sym_not sym_sqrt sym_sum""")),
        (_SPARSE, _names("""
            dsmm hsmm saddmm ccol_indices_copy col_indices_copy crow_indices_copy indices_copy
            row_indices_copy values_copy resize_as_sparse_ native_norm""")),
        (_REMOVED, _names("eig lstsq matrix_rank solve symeig")),
        (_REEXPORT, _names("windows")),
        (_OVERRIDES, _names("overrides")),
        (_SYNCBN, _names("""
            batch_norm_backward_elemt batch_norm_backward_reduce batch_norm_elemt batch_norm_gather_stats
            batch_norm_gather_stats_with_counts batch_norm_stats batch_norm_update_stats""")),
        (_INTERNAL, _names("""
            classproperty get_file_path prepare_multiprocessing_environment USE_GLOBAL_DEPS
            USE_RTLD_GLOBAL_WITH_LIBTORCH profiler_allow_cudagraph_cupti_lazy_reinit_cuda12 slice_inverse""")),
    ],
    "Tensor": [
        (_QUANT, _names("""dequantize int_repr q_per_channel_axis q_per_channel_scales q_per_channel_zero_points
                           q_scale q_zero_point qscheme""")),
        (_SUBBYTE, _names("chalf")),
        (_REMOVED, _names("eig lstsq solve symeig")),
        (_SPARSE, _names("resize_as_sparse_ sparse_resize_ sparse_resize_and_clear_")),
        (_VENDOR, _names("to_mkldnn ipu")),
        (_LEGACY, _names("reinforce volatile name")),
        (_INTERNAL, _names("slice_inverse")),
    ],
    "nn": [
        (_QUANT, _names("intrinsic qat quantizable quantized")),
        (_LEGACY, _names("Container CrossMapLRN2d")),
        (_INTERNAL, _names("factory_kwargs")),
    ],
    "nn.functional": [
        (_DOC, _names("""BroadcastingList1 BroadcastingList2 BroadcastingList3 reproducibility_notes
                         sparse_support_notes tf32_notes""")),
        (_AOT_TENSOR_PARALLEL, _names("ScalingType SwizzleType grouped_mm scaled_grouped_mm scaled_mm")),
        (_INTERNAL, _names("assert_int_or_pair boolean_dispatch")),
        (_TORCH_FUNCTION, _names("""handle_torch_function has_torch_function has_torch_function_unary
                                   has_torch_function_variadic""")),
    ],
    "optim.lr_scheduler": [
        (_REEXPORT, _names("Optimizer Tensor inf bisect_right")),
        (_INTERNAL, _names("EPOCH_DEPRECATION_WARNING")),
    ],
    "linalg": [(_DOC, _names("common_notes"))],
    "fft": [(_DOC, _names("common_args factory_common_args")), (_REEXPORT, _names("Tensor"))],
    "special": [(_DOC, _names("common_args multi_dim_common")), (_REEXPORT, _names("Tensor"))],
    "distributions": [],
    "autograd": [
        (_PROFILER, _names("""DeviceType ProfilerActivity ProfilerConfig ProfilerEvent ProfilerState kineto_available
                              profiler_legacy""")),
        (_LEGACY, _names("NestedIOFunction")),
        (_TORCH_FUNCTION, _names("handle_torch_function has_torch_function is_tensor_like")),
    ],
    "nn.utils.rnn": [(_INTERNAL, _names("bind"))],
    "autograd.graph": [(_COMPILE_ONLY, _names("region_activation_memory_budget set_override_stale_capture_stream")),
                       (_NEW_213, _names("allow_mutation_on_saved_tensors"))],
    "func": [(_NEW_213, _names("rearrange"))],
    "testing": [(_TORCHSCRIPT, _names("FileCheck"))],
    "backends": [(_INTERNAL, _names("m")), (_NEW_213, _names("python_native"))],
    "overrides": [(_TEST_ONLY, _names("get_testing_overrides")), (_NEW_213, _names("redispatch_function"))],
    "utils.data": [
        (_DATAPIPES, _names("""DFIterDataPipe DataChunk IterDataPipe MapDataPipe functional_datapipe
                               guaranteed_datapipes_determinism non_deterministic runtime_validation_disabled
                               argument_validation runtime_validation datapipes graph graph_settings""")),
    ],
}

EXCLUDED: dict[str, dict[str, str]] = {
    ns: {name: reason for reason, names in groups for name in names} for ns, groups in _GROUPS.items()
}
