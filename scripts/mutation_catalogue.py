"""The mutation catalogue scripts/mutation_report.py plants, one at a time.

Each mutant is a source patch: in `file`, the exact text `find` (occurring
`count` times, all replaced) becomes `repl`. `kind` is "forward-consistent"
when every kernel set and the backward see the same wrong function (the bug
lives in a place they share: the engine, a family's wiring, a constant or
table the kernels take from the spec) — the bugs finite differences, the
kernel bit tests and the gates cannot see by construction; "local" otherwise.
`suite` names the instruments relevant to the code it lives in
(mutation_report.py: SUITES); `family` narrows the golden run and `op` the
kernel bit test where one applies. `ci` (a rank, 1 first) puts a mutant in the CI sample
(mutation_report.py --ci).

The CUDA kernel mutants are backend/cuda/mutant.hpp's (planted in-process on the
device by tests/cuda/gate_mutants_test.cpp); the wrong backwards are
ad/mutants.cpp's (run in-process by tests/ad/mutants_test.cpp): the report lists
both families from those tests' own output instead of re-planting them.
"""

M = []
# The CUDA kernel mutants: planted by their runtime switch (backend/cuda/mutant.hpp,
# no rebuild) and run on the device by mutation_report.py --cuda
# (tests/cuda/mutation_runtime_test.cpp: the start-up gates and the live audits).
CUDA = []


def cuda_mutant(id, enum, desc):
    CUDA.append(dict(id=id, enum=enum, area="cuda kernels", kind="local", desc=desc))


def mutant(id, area, file, find, repl, kind="local", suite="model", desc="", count=1, family=None, op=None, ci=False,
           tests=()):
    M.append(dict(id=id, area=area, file=file, find=find, repl=repl, kind=kind, suite=suite, desc=desc,
                  count=count, family=family, op=op, ci=ci, tests=list(tests)))


FC = "forward-consistent"
T = "src/lockstep/model/transformer.hpp"

# --- the engine and the families' wiring: every kernel set runs them -----------
mutant("rope-theta-ignored", "model", T, "            cfg_.rope_theta,\n", "            10000.0,\n", FC,
       desc="RoPE base ignored: θ = 10000 whatever the config says")
mutant("rope-layout-ignored", "model", T,
       "cfg_.rope_layout == RopeLayout::RotateHalf ? ops::RopeLayout::rotate_half : ops::RopeLayout::interleaved",
       "ops::RopeLayout::rotate_half", FC, desc="RoPE layout ignored: always rotate-half")
mutant("norm-eps-ignored", "model", T, "return {rows, dim, cfg_.norm_eps}; }", "return {rows, dim, 1e-5}; }", FC,
       desc="norm eps ignored: 1e-5 whatever the config says")
mutant("attention-scale-1/d", "model", T, "return {B_, S_, Hq_, Hkv_, Dh_, 0.0, 64}; }",
       "return {B_, S_, Hq_, Hkv_, Dh_, 1.0 / static_cast<double>(Dh_), 64}; }", FC,
       desc="attention scores scaled by 1/d instead of 1/sqrt(d)")
mutant("loss-mean-over-all-rows", "model", T, "static_cast<T>(n_valid)", "static_cast<T>(N_)", FC, count=2,
       desc="the loss mean divides by every row, ignored targets included (value and cotangent)")
mutant("swiglu-gate-up-swapped", "model", "src/lockstep/model/families/llama.hpp",
       ".gate = a.gate.data(), .up = a.up.data()", ".gate = a.up.data(), .up = a.gate.data()", FC, count=2,
       family="llama", desc="SwiGLU's gate and up swapped (forward and backward)")
mutant("positions-offset-by-one", "model", T,
       "return {B_, S_, D_, static_cast<std::size_t>(cfg_.max_seq), 0}; }",
       "return {B_, S_, D_, static_cast<std::size_t>(cfg_.max_seq), 1}; }", FC, family="gpt2",
       desc="GPT-2 learned positions read from position 1")
mutant("rope-offset-by-one", "model", T, "ops::RopeLayout::interleaved,\n            0};",
       "ops::RopeLayout::interleaved,\n            1};", FC, family="llama",
       desc="RoPE positions start at 1 (for q and k alike): equivalent in real arithmetic — RoPE scores depend "
            "on relative positions only — so only rounding (the golden hashes) can see it; it must survive the rest")

# --- op specifications whose constants/tables the kernels share -----------------
A = "src/lockstep/ops/activation.hpp"
mutant("gelu-constant-mistyped", "ops", A,
       "kCubic = 0.044715;\n  static constexpr double kCubic3 = 0.134145;",
       "kCubic = 0.04475;\n  static constexpr double kCubic3 = 0.13425;", FC, family="gpt2", op="gelu",
       desc="GELU's cubic constant mistyped (0.04475), its 3x with it")
mutant("gelu-sqrt2pi-mistyped", "ops", A, "kSqrt2OverPi = 0.79788456080286535588;", "kSqrt2OverPi = 0.7978845;",
       FC, family="gpt2", op="gelu", desc="GELU's sqrt(2/pi) truncated to 7 digits")
R = "src/lockstep/ops/rope.hpp"
mutant("rope-frequency-exponent", "ops", R, "static_cast<T>(2 * j) / static_cast<T>(c.head_dim)",
       "static_cast<T>(2 * j + 2) / static_cast<T>(c.head_dim)", FC, family="llama", op="rope",
       desc="RoPE frequencies θ^(-(2j+2)/d) (shared table)")
mutant("rope-table-position-shift", "ops", R, "static_cast<T>(c.offset + t) * inv_freq[j]",
       "static_cast<T>(c.offset + t + 1) * inv_freq[j]", FC, family="llama", op="rope",
       desc="RoPE table one position ahead (shared table)")
AT = "src/lockstep/ops/attention.hpp"
mutant("attention-scale-spec", "ops", AT, ": T(1) / Math<T>::sqrt(static_cast<T>(c.head_dim));",
       ": T(1) / static_cast<T>(c.head_dim);", FC, op="attention",
       desc="attention scale_of (shared with the kernels) 1/d")
mutant("gqa-head-map-modulo", "ops", AT, "const std::size_t g = h / (c.q_heads / c.kv_heads);",
       "const std::size_t g = h % c.kv_heads;", count=4, family="llama", op="attention",
       desc="grouped-query head map h % Hkv instead of h / group (spec)")
mutant("causal-mask-off-by-one", "ops", AT, "c.kv_heads * c.head_dim, i + 1, scale, o, lse);",
       "c.kv_heads * c.head_dim, std::min(i + 2, c.seq), scale, o, lse);", op="attention",
       desc="causal mask lets row i see key i+1 (spec forward)")
Q = "src/lockstep/ops/quant.hpp"
mutant("act-quant-128", "ops", Q, "const T inv = T(127) / m;", "const T inv = T(128) / m;", family="bitnet",
       op="bitlinear", desc="activation quantizer scales to 128 with steps of m/127")
N = "src/lockstep/ops/norm.hpp"
mutant("rmsnorm-eps-dropped-spec", "ops", N, "const T rstd = M::rsqrt(ms + static_cast<T>(c.eps));",
       "const T rstd = M::rsqrt(ms);",
       family="llama", op="rmsnorm", desc="RMSNorm spec ignores eps")
SM = "src/lockstep/ops/softmax.hpp"
mutant("ce-target-off-by-one", "ops", SM, "lse - z[target(c, t)];", "lse - z[target(c, t) == 0 ? 0 : target(c, t) - 1];",
       op="cross_entropy", desc="cross-entropy reads the logit before the target")

mutant("relu2-is-relu", "ops", A, "out.y[i] = (r * r) * in.up[i];", "out.y[i] = r * in.up[i];", family="bitnet",
       op="relu2_mul", desc="ReLU² forward computes ReLU (backward unchanged)")
mutant("layernorm-eps-dropped-spec", "ops", N, "const T rstd = M::rsqrt(var + static_cast<T>(c.eps));",
       "const T rstd = M::rsqrt(var);", family="gpt2", op="layernorm", desc="LayerNorm spec ignores eps")

# --- CPU kernels ------------------------------------------------------------------
C = "src/lockstep/backend/cpu/ops.cpp"
mutant("cpu-rmsnorm-eps-dropped", "cpu kernels", C, "const float rs = num::rsqrt(ms + eps);",
       "const float rs = num::rsqrt(ms + 0.0f * eps);", op="rmsnorm", family="llama", desc="fast RMSNorm kernel ignores eps")
mutant("cpu-rmsnorm-weight-order", "cpu kernels", C, "yr[j] = (xr[j] * rs) * w[j];", "yr[j] = xr[j] * (rs * w[j]);",
       op="rmsnorm", family="llama", desc="fast RMSNorm multiplies in another order (last-bit change)")
G = "src/lockstep/backend/cpu/gemm.cpp"
mutant("cpu-gemm-k-block-restart", "cpu kernels", G, "ct, k0 == 0);\n        else", "ct, true);\n        else",
       op="linear", desc="GEMM restarts the chain at every k block (drops earlier blocks when K > depth)")
V = "src/lockstep/backend/cpu/vmath.cpp"
mutant("cpu-vexp-coefficient", "cpu kernels", V, "q = fma(q, rh, k(0x1.a01a02p-16f));",
       "q = fma(q, rh, k(0x1.a01a04p-16f));", op="softmax", desc="vector exp polynomial coefficient off by 2 ulp")

# --- canonical reductions -------------------------------------------------------
RD = "src/lockstep/num/reduce.hpp"
mutant("reduce-tree-order", "reductions", RD, "for (std::size_t j = 0; j < off; ++j) p[j] = p[j] + p[j + off];",
       "for (std::size_t j = 0; j < off; ++j) p[j] = p[j + off] + p[j];", suite="reduce",
       desc="lane tree adds (b + a): the same sum (commutative) — an equivalent mutant, must survive")
mutant("reduce-tree-half-lanes", "reductions", RD, "for (std::size_t off = kLanes / 2; off >= 1; off /= 2)",
       "for (std::size_t off = kLanes / 4; off >= 1; off /= 2)", suite="reduce",
       desc="lane tree drops lanes 16..31")

# --- optimizer and schedule -----------------------------------------------------
O = "src/lockstep/ops/optim.hpp"
TO = "src/lockstep/train/optim.cpp"
mutant("adam-eps-inside-sqrt", "optimizer", O, "num::fma_rn(sqrtf(v), s.inv_sqrt_bc2, s.eps)",
       "sqrtf(num::fma_rn(v, s.inv_sqrt_bc2 * s.inv_sqrt_bc2, s.eps))", suite="train",
       desc="AdamW's eps inside the square root")
mutant("adam-decay-everywhere", "optimizer", O, "float q = decay ? p * s.decay : p;", "float q = (static_cast<void>(decay), p * s.decay);",
       suite="train", desc="weight decay applied to norms and biases too (decay flag ignored)")
mutant("clip-threshold-off", "optimizer", O, "Fp::div(max_norm, Fp::add(norm, 1e-6f))",
       "Fp::div(max_norm, Fp::add(norm, 1e-1f))", suite="train", desc="clip scale's epsilon 1e-1")
mutant("schedule-warmup-off-by-one", "schedule", TO, "peak * static_cast<float>(step + 1) / static_cast<float>(s.warmup_steps)",
       "peak * static_cast<float>(step) / static_cast<float>(s.warmup_steps)", suite="train", ci=3,
       desc="warmup starts at lr 0 (step instead of step + 1)")
mutant("schedule-no-min-lr", "schedule", TO, "const float lo = peak * static_cast<float>(s.min_lr_ratio);",
       "const float lo = 0.0f;", suite="train", desc="cosine decays to 0, ignoring min_lr_ratio")
mutant("adam-bias-correction-t-1", "optimizer", TO, "const double bc1 = 1.0 - power(opt.beta1, t);",
       "const double bc1 = 1.0 - power(opt.beta1, t + 1);", suite="train", desc="bias correction one step ahead")

# --- the trainer's wiring ---------------------------------------------------------
TR = "src/lockstep/train/trainer.cpp"
mutant("clip-before-accum-scale", "trainer wiring", "src/lockstep/train/step.cpp",
       "const float grad_scale = ops::accum_grad_scale(static_cast<std::size_t>(accum_));",
       "const float grad_scale = 1.0f;", suite="train",
       desc="the 1/accum mean not applied before the norm and clip (sum of micro-batch gradients)")
mutant("accum-overwrites", "trainer wiring", "src/lockstep/train/step.cpp", "stages.micro_batch(a, a > 0);",
       "stages.micro_batch(a, false);",
       suite="train", desc="each micro-batch overwrites the gradient instead of adding")
mutant("data-order-step-ignored", "trainer wiring", TR,
       "data::sample_batch(train_, data_seed_, static_cast<std::uint64_t>(s), B * A, T)",
       "data::sample_batch(train_, data_seed_, 0, B * A, T)", suite="train",
       desc="every step draws the same windows (the step does not key the data order)")
mutant("lr-schedule-step-plus-one", "trainer wiring", TR, "const float lr = learning_rate(adamw_, sched_, s);",
       "const float lr = learning_rate(adamw_, sched_, s + 1);", suite="train", desc="schedule read one step ahead")

# --- checkpoint / resume ----------------------------------------------------------
RN = "src/lockstep/train/run.cpp"
mutant("resume-forgets-tokens-seen", "checkpoint/resume", RN, "    tokens_seen = ck->meta.tokens_seen;\n", "\n",
       suite="train", ci=1, desc="a resume that forgets the tokens-seen counter")
mutant("resume-keeps-stale-metrics", "checkpoint/resume", RN,
       '.at("step").get<std::int64_t>() <= keep_through_step)', '.at("step").get<std::int64_t>() >= 0)',
       suite="train", desc="a resume keeps metrics lines after its checkpoint (written twice)")
mutant("resume-forgets-elapsed", "checkpoint/resume", RN, "    elapsed_before = ck->meta.elapsed_seconds;\n", "\n",
       suite="train", desc="a resume restarts the elapsed-time counter (wall clock: invisible to exact checks)")
CK = "src/lockstep/train/checkpoint.cpp"
mutant("resume-optimizer-step-reset", "checkpoint/resume", CK, "  opt.step = std::stoll(step_it->second);\n",
       "  opt.step = 0;\n", suite="train", desc="the optimizer's update count not restored")
mutant("conv1d-not-transposed", "checkpoint/resume", CK,
       "(ends_with(p.name, \".attn.c_attn.weight\") || ends_with(p.name, \".attn.c_proj.weight\") ||",
       "(ends_with(p.name, \".attn.c_attn.weightX\") || ends_with(p.name, \".attn.c_proj.weightX\") ||",
       suite="model", family="gpt2",
       desc="GPT-2 attention Conv1D weights saved and loaded untransposed (self-consistent round trip)")

# --- data pipeline ----------------------------------------------------------------
SH = "src/lockstep/data/shards.cpp"
mutant("targets-not-shifted", "data", SH, "std::copy(w.begin() + 1, w.end(), b.targets.begin()",
       "std::copy(w.begin(), w.end() - 1, b.targets.begin()", suite="data",
       desc="targets are the inputs (not the next tokens)")
mutant("window-start-off-by-one", "data", SH, "start = (u * starts) >> 32;", "start = ((u * starts) >> 32) + 1;",
       suite="data", desc="sampled windows start one token late")

# --- tokenizers -------------------------------------------------------------------
BP = "src/lockstep/tok/bpe.cpp"
mutant("bpe-merge-priority-reversed", "tokenizers", BP, "m->priority < best->priority", "m->priority > best->priority",
       suite="tok", desc="BPE applies the lowest-priority merge first")

# --- aimed at the metamorphic properties and absolutes (tests/property) -------------
# Each is a bug a relation or a definitional absolute sees without a reference:
# the report's metamorphic column must show it (issue 17: each property catches one).
CA = "src/lockstep/backend/cpu/attention.cpp"
mutant("cpu-attention-keys-stale-across-batch", "cpu kernels", CA, "if (b != last_b || g != last_g) transpose(",
       "if (g != last_g) transpose(", op="attention", family="llama", ci=2,
       desc="batch coupling: the transposed keys are reused when the batch changes but the kv head does not "
            "(MQA: every row attends to batch 0's keys)")
mutant("cpu-attention-causal-sees-next", "cpu kernels", CA, "const std::size_t j1 = std::min(j0 + KB, i + 1);",
       "const std::size_t j1 = std::min(j0 + KB, std::min(i + 2, i_last + 1));", op="attention",
       desc="causal mask off by one in the fast kernel: row i's softmax takes key i+1's score")
mutant("cpu-ce-ignored-row-loss", "cpu kernels", C, "loss[n] = t < 0 ? 0.0f : l - z[static_cast<std::size_t>(t)];",
       "loss[n] = l - z[static_cast<std::size_t>(t < 0 ? 0 : t)];", op="cross_entropy",
       desc="the fast cross-entropy forgets the ignore mask: a row without a target adds a loss")
mutant("cpu-ce-exp-misses-last", "cpu kernels", C, "      exp_n(e, e, V);  // e_j = exp(z_j - m)",
       "      exp_n(e, e, V - 1);  // e_j = exp(z_j - m)", op="cross_entropy",
       desc="the fast cross-entropy's exp call one entry short: the last logit enters the sum unexponentiated")
mutant("act-quant-floor-added", "ops", Q, "const T m = max2(M::max(a.data(), cols), floor_value);",
       "const T m = M::max(a.data(), cols) + floor_value;", FC, family="bitnet", op="bitlinear",
       desc="the activation absmax floor added instead of clamped: not homogeneous (a power-of-two scaling of x "
            "no longer scales y exactly)")
mutant("units-dequant-step-128", "ops", Q, "r.step[n] = m / T(127);", "r.step[n] = m / T(128);", FC,
       family="bitnet", op="bitlinear", desc="the int8 dequantization step m/128 (codes still in steps of m/127): "
                                             "off at unit scale")
mutant("softmax-sum-drops-last", "ops", SM, "const T s = M::sum(y, C);", "const T s = M::sum(y, C > 1 ? C - 1 : C);",
       op="softmax", desc="softmax normalizes by the sum of all but the last entry")
mutant("ternary-scale-mean-off-by-one", "ops", Q, "M::sum(a.data(), n) / static_cast<T>(n)",
       "M::sum(a.data(), n) / static_cast<T>(n + 1)", FC, family="bitnet", op="bitlinear",
       desc="BitLinear's absmean divides by numel + 1: off at unit scale (all-±1 weights)")

mutant("pretok-digit-run-of-4", "tokenizers", "src/lockstep/tok/pretokenize.cpp",
       "for (int n = 0; n < 3 && !t.end(k); ++n) {", "for (int n = 0; n < 4 && !t.end(k); ++n) {", suite="tok",
       desc="cl100k / LLaMA-3 pre-tokenizer: digit runs of up to 4 (\\p{N}{1,3} off by one)")
mutant("tok-repeat-cache-first-id-only", "tokenizers", BP, "it->second.second = out.size() - it->second.first;",
       "it->second.second = 1;", suite="tok",
       desc="the repeated-piece cache records one id: a repeated multi-token word keeps only its first token")

# --- the self-corpus: this project's own bugs, re-planted -------------------------
# Each entry reverses the fix of a bug the git history names, and lists the
# regression test that now guards it ("regression"), besides its area's instruments.
mutant("history-token-ids-unchecked", "history (ed48827)", T, "      ops::Embedding::row_of(ec, ids[n]);\n",
       "      (void)ec;\n      (void)ids;\n", suite="model",
       tests=[("regression", "test_model_cpu", "tests/model/test_model_cpu", "CpuModel.BadTokens*")],
       desc="token ids not checked on the host before a pass (the GPU read outside the table)")
mutant("history-rdb-size-claim", "history (rdata)", "src/lockstep/data/rdata.cpp",
       "if (want > (1u << 30) || want > most)", "if (want > (1u << 31) && want > most)", suite="none",
       tests=[("regression", "test_history", "tests/history/test_history", "History.AnRdb*"),
              ("unit", "test_rdata", "tests/data/test_rdata", "*")],
       desc="an .rdb blob's size claim trusted: 1 GiB allocated before zlib fails")
mutant("history-json-overflow", "history (fuzz_gpt2)", "src/lockstep/tok/bpe_io.cpp",
       '''  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double is out_of_range
    // (found by fuzz/fuzz_gpt2).
    fail(source, "", std::string("invalid JSON: ") + e.what());
''', "", suite="none",
       tests=[("regression", "test_tok_vocab", "tests/tok/test_tok_vocab", "TokVocab.MalformedFiles*")],
       desc="a JSON number overflowing a double escapes as nlohmann's out_of_range, not a runtime_error")
mutant("history-gate-stub", "history (6858679)", "src/lockstep/backend/cuda/gate_driver.cpp",
       "for (const GateCase& g : Op::gate_cases())",
       "for (const GateCase& g : std::is_same_v<Op, ops::Attention> ? std::vector<GateCase>{} : Op::gate_cases())",
       suite="none", tests=[("regression", "test_cuda_gate_cases", "tests/cuda/test_cuda_gate_cases", "*")],
       desc="a merge leaves a temporary gate stub: attention's gate case list empty (the gates pass vacuously)")
mutant("history-bitlinear-decision-flip", "history (3fef999)", "tests/model/model_gradcheck_test.cpp",
       "    if (quantized) {\n      Hand<double> hand_d", "    if (false && quantized) {\n      Hand<double> hand_d",
       suite="none",
       tests=[("regression", "test_model_gradcheck", "tests/model/test_model_gradcheck", "ModelSpec.TheLoss*",
               {"LOCKSTEP_SEED": "6608125647251228489"})],
       desc="the float loss compared with double's own BitLinear decisions: fails about one seed in 30 (the "
            "repeat runner's seed reproduces it)")


# --- CUDA kernels (runtime switches; the device half of the report) --------------
cuda_mutant("cuda-gemm-assign-not-accumulate", "gemm_assign_not_accumulate", "GEMM: acc = a·b instead of acc = fma(a, b, acc)")
cuda_mutant("cuda-gemm-no-bounds-guard", "gemm_no_bounds_guard", "GEMM: loads past the matrix edge without the guard")
cuda_mutant("cuda-gemm-skip-last-column", "gemm_skip_last_column", "GEMM: the last output column is never written")
cuda_mutant("cuda-gemm-missing-barrier", "gemm_missing_barrier", "GEMM: a tile overwritten before every thread read it")
cuda_mutant("cuda-attention-drop-scale", "attention_drop_scale", "attention: scores without the 1/sqrt(Dh) factor")
cuda_mutant("cuda-residual-flush-negative-zero", "residual_flush_negative_zero", "residual add: -0 written as +0")
cuda_mutant("cuda-layernorm-fused-mul-add", "layernorm_fused_mul_add", "LayerNorm: fma where the spec has mul then add")
cuda_mutant("cuda-adamw-decay-every-tensor", "adamw_decay_every_tensor", "AdamW decays norms and biases too")
cuda_mutant("cuda-clip-without-epsilon", "clip_without_epsilon", "clip = max_norm / norm, the + 1e-6 dropped")
cuda_mutant("cuda-clip-scales-up", "clip_scales_up", "the clip applied whenever it is not 1 (small gradients scaled up)")
cuda_mutant("cuda-int8-dp4a-int16-accumulator", "int8_dp4a_int16_accumulator", "DP4A int8 GEMM sums in int16 (wraps)")
cuda_mutant("cuda-int8-imma-k-tail-dropped", "int8_imma_k_tail_dropped", "IMMA int8 GEMM: a ragged K loses its tail tile")
cuda_mutant("cuda-int8-imma-last-column-skipped", "int8_imma_last_column_skipped",
            "IMMA int8 GEMM: an odd M's last column not stored")
cuda_mutant("cuda-unit-attention-weights-round-down", "unit_attention_weights_round_down",
            "units attention: weight codes floor(u·inv), the + 0.5 dropped")
cuda_mutant("cuda-rmsnorm-rows-blocked-lanes", "rmsnorm_rows_blocked_lanes",
            "RMSNorm's CTA-a-row path: lane j folds a contiguous run, not j, j+32, ...")
cuda_mutant("cuda-row-quantize-first-warp-max", "row_quantize_first_warp_max",
            "row_quantize_i8's CTA-a-row path: max |x| of warp 0's elements only")
cuda_mutant("cuda-col-quant-last-chunk-dropped", "col_quant_last_chunk_dropped",
            "two-pass column quantizer: the last chunk of rows not joined")
cuda_mutant("cuda-col-quant-sums-in-pairs", "col_quant_sums_in_pairs",
            "column quantizer's fused column sums add rows in pairs (reassociated)")
cuda_mutant("cuda-col-quant-sums-tile-rows-swapped", "col_quant_sums_tile_rows_swapped",
            "tiled column sums: a tile's rows 64..127 added before rows 0..63 (reassociated)")
cuda_mutant("cuda-col-quant-codes-stale-subtile", "col_quant_codes_stale_subtile",
            "overlapped column codes (v2): a sub-tile quantized from the previous sub-tile's registers")
cuda_mutant("cuda-lora-scale-add-fused", "lora_scale_add_fused", "LoRA glue: y + u·s as fma(u, s, y)")
cuda_mutant("cuda-norm-quantize-stale-row", "norm_quantize_stale_row",
            "fused RMSNorm + row codes (decode): the codes of the staged x, not of y")
