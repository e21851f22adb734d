# ggml_ops.py: run single ggml-cpu operations (and glibc's libm) on inputs
# written by a Go test, for checking nn's copies of llama.cpp's arithmetic
# (nn/ggml.go, nn/libm.go; ml.Router's int8 routing: route, argsort) bit for bit.
# Not run by the tests: TestGGMLArithmetic (and ml's TestRouteGGML*) pin hashes
# of what this printed for their inputs. Run it where libggml is,
# e.g. in a Debian sid chroot with llama.cpp 0.7.0 (libggml0 0.27.0) and
# python3-numpy, python3-gguf installed, as
#   chroot SID python3 /tmp/gx/ggml_ops.py OP ARGS...
# with the inputs in /tmp/gx, or the directory $GX, (x.bin, w.bin, q.bin, k.bin, v.bin: raw
# little-endian float32, k and v float16) and the output in /tmp/gx/out.bin.
# OPs: rms EPS | swiglu | geglu | gelu | swiglu-oai | swiglu-clamp LIMIT | swiglu-clampf LIMIT | softcap CAP | silu-div | xielu AN AP BETA EPS | rope N HEADS HEADDIM MODE BASE [FREQ_SCALE EXT ATTN BETA_FAST BETA_SLOW N_CTX_ORIG] | fa N H HKV D SCALE [CAP [SPARSE [MAX_BIAS [SINKS]]]] | mmattn N H HKV D SCALE [CAP] |
# trig | expf | logf | powf | f16 | mm MODEL.gguf TENSOR N REPACK(0|1) [ROWS BLOCKS] (the first ROWS rows' first BLOCKS blocks of 32) | conv N C K | scan N H P G N [E] | gdn N HK HV S EPS | wkv7 N H D | wkv6 N H D | gla N H D SCALE |
# route E K GATING NORM SCALE GROUPS GROUPS_USED BIAS(0|1) | argsort N | topk N K | situ BETA LINEAR_BETA | resmix N C E EPS.
# VARIANT=zen4 (default) picks the libggml-cpu build.
import ctypes as C, numpy as np, sys, os
base = C.CDLL("/usr/lib/x86_64-linux-gnu/libggml-base.so.0", mode=C.RTLD_GLOBAL)
cpu = C.CDLL("/usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-cpu-" + os.environ.get("VARIANT", "zen4") + ".so", mode=C.RTLD_GLOBAL)
class IP(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]
base.ggml_init.restype = C.c_void_p; base.ggml_init.argtypes = [IP]
P = C.c_void_p
for f, n in [("ggml_new_tensor_1d", 3), ("ggml_new_tensor_2d", 4), ("ggml_new_tensor_3d", 5), ("ggml_new_tensor_4d", 6)]:
    fn = getattr(base, f); fn.restype = P; fn.argtypes = [P, C.c_int] + [C.c_int64] * (n - 2)
base.ggml_get_data.restype = P; base.ggml_get_data.argtypes = [P]
base.ggml_rms_norm.restype = P; base.ggml_rms_norm.argtypes = [P, P, C.c_float]
base.ggml_mul.restype = P; base.ggml_mul.argtypes = [P, P, P]
base.ggml_rope_ext.restype = P; base.ggml_rope_ext.argtypes = [P, P, P, P, C.c_int, C.c_int, C.c_int] + [C.c_float] * 6
base.ggml_flash_attn_ext.restype = P; base.ggml_flash_attn_ext.argtypes = [P, P, P, P, P, C.c_float, C.c_float, C.c_float]
base.ggml_swiglu_split.restype = P; base.ggml_swiglu_split.argtypes = [P, P, P]
base.ggml_geglu_split.restype = P; base.ggml_geglu_split.argtypes = [P, P, P]
base.ggml_swiglu_oai.restype = P; base.ggml_swiglu_oai.argtypes = [P, P, P, C.c_float, C.c_float]
base.ggml_tanh.restype = P; base.ggml_tanh.argtypes = [P, P]
base.ggml_gelu.restype = P; base.ggml_gelu.argtypes = [P, P]
base.ggml_silu.restype = P; base.ggml_silu.argtypes = [P, P]
base.ggml_clamp.restype = P; base.ggml_clamp.argtypes = [P, P, C.c_float, C.c_float]
base.ggml_xielu.restype = P; base.ggml_xielu.argtypes = [P, P] + [C.c_float] * 4
base.ggml_div.restype = P; base.ggml_div.argtypes = [P, P, P]
base.ggml_scale.restype = P; base.ggml_scale.argtypes = [P, P, C.c_float]
base.ggml_mul_mat.restype = P; base.ggml_mul_mat.argtypes = [P, P, P]
base.ggml_top_k.restype = P; base.ggml_top_k.argtypes = [P, P, C.c_int]
base.ggml_new_graph.restype = P; base.ggml_new_graph.argtypes = [P]
base.ggml_build_forward_expand.argtypes = [P, P]
cpu.ggml_graph_compute_with_ctx.argtypes = [P, P, C.c_int]
base.ggml_nbytes.restype = C.c_size_t; base.ggml_nbytes.argtypes = [P]
ctx = base.ggml_init(IP(1 << 30, None, False))
F32, F16, I32 = 0, 1, 26
def new(t, shape):  # shape in ggml order (ne0, ne1, ...)
    return getattr(base, "ggml_new_tensor_%dd" % len(shape))(ctx, t, *shape)
def put(tn, arr):
    b = np.ascontiguousarray(arr).tobytes()
    assert len(b) == base.ggml_nbytes(tn), (len(b), base.ggml_nbytes(tn))
    C.memmove(base.ggml_get_data(tn), b, len(b))
def get(tn, dtype=np.float32):
    n = base.ggml_nbytes(tn)
    return np.frombuffer(C.string_at(base.ggml_get_data(tn), n), dtype=dtype).copy()
def run(out, threads=2):
    g = base.ggml_new_graph(ctx)
    base.ggml_build_forward_expand(g, out)
    cpu.ggml_graph_compute_with_ctx(ctx, g, threads)
d = os.environ.get("GX", "/tmp/gx") + "/"
op = sys.argv[1]
if op == "rms":  # x (n, k) f32, w (k), eps
    x = np.fromfile(d + "x.bin", np.float32); w = np.fromfile(d + "w.bin", np.float32)
    k = len(w); n = len(x) // k; eps = float(sys.argv[2])
    tx = new(F32, [k, n]); put(tx, x); tw = new(F32, [k]); put(tw, w)
    o = base.ggml_mul(ctx, base.ggml_rms_norm(ctx, tx, eps), tw); run(o)
    get(o).tofile(d + "out.bin")
elif op == "rope":  # x (n, heads, hd), mode, base; YaRN: freq scale, ext factor, attn factor, betas, original context
    x = np.fromfile(d + "x.bin", np.float32); n, heads, hd, mode = map(int, sys.argv[2:6]); fb = float(sys.argv[6])
    fs, ext, attn, bf, bs = map(float, sys.argv[7:12]) if len(sys.argv) > 7 else (1.0, 0.0, 1.0, 0.0, 0.0)
    orig = int(sys.argv[12]) if len(sys.argv) > 12 else 0
    tx = new(F32, [hd, heads, n]); put(tx, x); tp = new(I32, [n]); put(tp, np.arange(n, dtype=np.int32))
    o = base.ggml_rope_ext(ctx, tx, tp, None, hd, mode, orig, fb, fs, ext, attn, bf, bs); run(o)
    get(o).tofile(d + "out.bin")
elif op == "fa":  # q (n, H, D) f32, k, v (n, HKV, D) f16 bits, scale, optional soft-cap; SPARSE 1: sparseKeep's keys only;
    # MAX_BIAS > 0: ALiBi, the mask holding -(i - j) as llama.cpp's KV cache writes it; SINKS 1: a sink per head
    n, H, HKV, D = map(int, sys.argv[2:6]); scale = float(sys.argv[6]); cap = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
    sparse = len(sys.argv) > 8 and sys.argv[8] == "1"
    max_bias = float(sys.argv[9]) if len(sys.argv) > 9 else 0.0
    q = np.fromfile(d + "q.bin", np.float32).reshape(n, H, D)
    k = np.fromfile(d + "k.bin", np.float16).reshape(n, HKV, D)
    v = np.fromfile(d + "v.bin", np.float16).reshape(n, HKV, D)
    tq = new(F32, [D, n, H]); put(tq, q.transpose(1, 0, 2))
    tk = new(F16, [D, n, HKV]); put(tk, k.transpose(1, 0, 2))
    tv = new(F16, [D, n, HKV]); put(tv, v.transpose(1, 0, 2))
    npad = (n + 63) // 64 * 64
    m = np.full((npad, n), -np.inf, np.float16)
    for i in range(n): m[i, :i + 1] = -(i - np.arange(i + 1)) if max_bias > 0 else 0
    if sparse:  # nn's sparseKeep: a pattern of holes, and keys [64, 128) hidden from rows 80 on
        for i in range(n):
            for j in range(i):
                if (i * 7 + j * 3) % 5 == 0 or (i >= 80 and 64 <= j < 128): m[i, j] = -np.inf
    tm = new(F16, [n, npad]); put(tm, m)
    o = base.ggml_flash_attn_ext(ctx, tq, tk, tv, tm, scale, max_bias, cap)
    if len(sys.argv) > 10 and sys.argv[10] == "1":  # SINKS: sinks.bin, a float32 per head
        base.ggml_flash_attn_ext_add_sinks.argtypes = [P, P]
        ts = new(F32, [H]); put(ts, np.fromfile(d + "sinks.bin", np.float32)); base.ggml_flash_attn_ext_add_sinks(o, ts)
    run(o)
    get(o).tofile(d + "out.bin")  # (n, H, D)
elif op == "mmattn":  # fa's inputs without SPARSE or ALiBi, as llama.cpp's attention without flash attention:
    # MUL_MAT(k, q) over n_kv = n padded to 256 (zero keys and values), with a soft-cap SCALE(scale/cap), TANH, SCALE(cap),
    # SOFT_MAX_EXT with the causal mask (and scale when uncapped), MUL_MAT(v transposed, p)
    n, H, HKV, D = map(int, sys.argv[2:6]); scale = float(sys.argv[6]); cap = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
    base.ggml_soft_max_ext.restype = P; base.ggml_soft_max_ext.argtypes = [P, P, P, C.c_float, C.c_float]
    q = np.fromfile(d + "q.bin", np.float32).reshape(n, H, D)
    nkv = (n + 255) // 256 * 256
    k = np.zeros((nkv, HKV, D), np.float16); k[:n] = np.fromfile(d + "k.bin", np.float16).reshape(n, HKV, D)
    v = np.zeros((nkv, HKV, D), np.float16); v[:n] = np.fromfile(d + "v.bin", np.float16).reshape(n, HKV, D)
    tq = new(F32, [D, n, H]); put(tq, q.transpose(1, 0, 2))
    tk = new(F16, [D, nkv, HKV]); put(tk, k.transpose(1, 0, 2))
    tv = new(F16, [nkv, D, HKV]); put(tv, v.transpose(1, 2, 0))
    m = np.full((n, nkv), -np.inf, np.float32)
    for i in range(n): m[i, :i + 1] = 0
    tm = new(F32, [nkv, n]); put(tm, m)
    kq = base.ggml_mul_mat(ctx, tk, tq)
    sm = scale
    if cap > 0:
        kq = base.ggml_scale(ctx, base.ggml_tanh(ctx, base.ggml_scale(ctx, kq, np.float32(scale) / np.float32(cap))), cap); sm = 1.0
    o = base.ggml_mul_mat(ctx, tv, base.ggml_soft_max_ext(ctx, kq, tm, sm, 0.0)); run(o)
    get(o).reshape(H, n, D).transpose(1, 0, 2).astype(np.float32).tofile(d + "out.bin")  # (n, H, D)
elif op == "gelu":  # x
    x = np.fromfile(d + "x.bin", np.float32); tx = new(F32, [len(x)]); put(tx, x)
    o = base.ggml_gelu(ctx, tx); run(o)
    get(o).tofile(d + "out.bin")
elif op in ("swiglu", "geglu", "swiglu-oai"):  # gate x, up w
    g = np.fromfile(d + "x.bin", np.float32); u = np.fromfile(d + "w.bin", np.float32)
    tg = new(F32, [len(g)]); put(tg, g); tu = new(F32, [len(u)]); put(tu, u)
    if op == "swiglu-oai":
        o = base.ggml_swiglu_oai(ctx, tg, tu, 1.702, 7.0)
    else:
        o = getattr(base, "ggml_%s_split" % op)(ctx, tg, tu)
    run(o)
    get(o).tofile(d + "out.bin")
elif op == "swiglu-clamp":  # gate x, up w, LIMIT: ggml_mul(ggml_clamp(ggml_silu(x), -inf, LIMIT), ggml_clamp(w, -LIMIT, LIMIT)), Step-3.5's
    g = np.fromfile(d + "x.bin", np.float32); u = np.fromfile(d + "w.bin", np.float32); lim = float(sys.argv[2])
    tg = new(F32, [len(g)]); put(tg, g); tu = new(F32, [len(u)]); put(tu, u)
    o = base.ggml_mul(ctx, base.ggml_clamp(ctx, base.ggml_silu(ctx, tg), float("-inf"), lim), base.ggml_clamp(ctx, tu, -lim, lim)); run(o)
    get(o).tofile(d + "out.bin")
elif op == "swiglu-clampf":  # gate x, up w, LIMIT: GGML_GLU_OP_SWIGLU_CLAMP (ggml_swiglu_clamp), Maple's experts
    g = np.fromfile(d + "x.bin", np.float32); u = np.fromfile(d + "w.bin", np.float32); lim = float(sys.argv[2])
    base.ggml_swiglu_clamp.restype = P; base.ggml_swiglu_clamp.argtypes = [P, P, P, C.c_float]
    tg = new(F32, [len(g)]); put(tg, g); tu = new(F32, [len(u)]); put(tu, u)
    o = base.ggml_swiglu_clamp(ctx, tg, tu, lim); run(o)
    get(o).tofile(d + "out.bin")
elif op == "situ":  # gate x, up w, BETA LINEAR_BETA: Kimi K3's SiTU as llama.cpp's kimi_k3_situ (SCALE, TANH, SCALE, MUL by SIGMOID; up SCALE, TANH, SCALE; MUL)
    g = np.fromfile(d + "x.bin", np.float32); u = np.fromfile(d + "w.bin", np.float32)
    beta, lb = np.float32(float(sys.argv[2])), np.float32(float(sys.argv[3]))
    base.ggml_sigmoid.restype = P; base.ggml_sigmoid.argtypes = [P, P]
    tg = new(F32, [len(g)]); put(tg, g); tu = new(F32, [len(u)]); put(tu, u)
    a = base.ggml_scale(ctx, base.ggml_tanh(ctx, base.ggml_scale(ctx, tg, np.float32(1) / beta)), beta)
    a = base.ggml_mul(ctx, a, base.ggml_sigmoid(ctx, tg))
    up = base.ggml_scale(ctx, base.ggml_tanh(ctx, base.ggml_scale(ctx, tu, np.float32(1) / lb)), lb)
    o = base.ggml_mul(ctx, a, up); run(o)
    get(o).tofile(d + "out.bin")
elif op == "resmix":  # checkpoints x (n, C, E), cur q (n, E), score weights w (E), EPS: Kimi K3's res_mix as llama.cpp's graph
    n, Cn, E = map(int, sys.argv[2:5]); eps = float(sys.argv[5])
    for f, a in [("ggml_sum_rows", [P, P]), ("ggml_soft_max", [P, P]), ("ggml_cont", [P, P]), ("ggml_add", [P, P, P]),
                 ("ggml_concat", [P, P, P, C.c_int]), ("ggml_reshape_2d", [P, P, C.c_int64, C.c_int64]),
                 ("ggml_view_2d", [P, P, C.c_int64, C.c_int64, C.c_size_t, C.c_size_t]), ("ggml_dsv4_hc_pre", [P, P, P])]:
        getattr(base, f).restype = P; getattr(base, f).argtypes = a
    x = np.fromfile(d + "x.bin", np.float32); q = np.fromfile(d + "q.bin", np.float32); w = np.fromfile(d + "w.bin", np.float32)
    src = new(F32, [E, Cn, n]); put(src, x); cur = new(F32, [E, n]); put(cur, q); tw = new(F32, [E]); put(tw, w)
    sc = base.ggml_sum_rows(ctx, base.ggml_mul(ctx, base.ggml_rms_norm(ctx, src, eps), tw))
    sc = base.ggml_reshape_2d(ctx, sc, Cn, n)
    scc = base.ggml_sum_rows(ctx, base.ggml_mul(ctx, base.ggml_rms_norm(ctx, cur, eps), tw))
    probs = base.ggml_soft_max(ctx, base.ggml_concat(ctx, sc, scc, 0))
    nb1 = 4 * (Cn + 1)
    ps = base.ggml_cont(ctx, base.ggml_view_2d(ctx, probs, Cn, n, nb1, 0))
    pc = base.ggml_cont(ctx, base.ggml_view_2d(ctx, probs, 1, n, nb1, 4 * Cn))
    o = base.ggml_add(ctx, base.ggml_dsv4_hc_pre(ctx, src, ps), base.ggml_mul(ctx, cur, pc)); run(o)
    get(o).tofile(d + "out.bin")
elif op == "topk":  # x (rows of N) -> the K indices TOP_K keeps per row, each row's sorted
    N, K = map(int, sys.argv[2:4]); x = np.fromfile(d + "x.bin", np.float32).reshape(-1, N)
    t = new(F32, [N, x.shape[0]]); put(t, x)
    o = base.ggml_top_k(ctx, t, K); run(o)
    np.sort(get(o, np.int32).reshape(-1, K), axis=1).astype(np.int32).tofile(d + "out.bin")
elif op == "softcap":  # x, CAP: ggml_scale(1/CAP), ggml_tanh, ggml_scale(CAP), as llama.cpp's final soft-cap
    x = np.fromfile(d + "x.bin", np.float32); cap = np.float32(float(sys.argv[2]))
    tx = new(F32, [len(x)]); put(tx, x)
    o = base.ggml_scale(ctx, base.ggml_tanh(ctx, base.ggml_scale(ctx, tx, np.float32(1) / cap)), cap); run(o)
    get(o).tofile(d + "out.bin")
elif op == "silu-div":  # x as n rows of 1: ggml_div(ggml_silu(x), x), qwen2moe's shared-expert gate
    x = np.fromfile(d + "x.bin", np.float32)
    tx = new(F32, [1, len(x)]); put(tx, x)
    o = base.ggml_div(ctx, base.ggml_silu(ctx, tx), tx); run(o)
    get(o).tofile(d + "out.bin")
elif op == "xielu":  # x, ALPHA_N ALPHA_P BETA EPS (the file's values: ggml_xielu transforms them)
    x = np.fromfile(d + "x.bin", np.float32)
    tx = new(F32, [len(x)]); put(tx, x)
    o = base.ggml_xielu(ctx, tx, *[float(a) for a in sys.argv[2:6]]); run(o)
    get(o).tofile(d + "out.bin")
elif op == "route":  # MoE routing as llama.cpp's build_moe_ffn: logits x (n, E), exp_probs_b w (E) when BIAS
    # GATING 1 softmax, 2 sigmoid, 3 softmax of the selected; out.bin the weights (n, K),
    # ids.bin the chosen experts (int32, n, K), probs.bin the gating's probabilities (n, E).
    E, K, gating, norm = map(int, sys.argv[2:6]); wscale = float(sys.argv[6]); G, GU, hasb = map(int, sys.argv[7:10])
    for f, at in [("ggml_soft_max", [P, P]), ("ggml_sigmoid", [P, P]), ("ggml_add", [P, P, P]), ("ggml_div", [P, P, P]),
                  ("ggml_reshape_2d", [P, P, C.c_int64, C.c_int64]), ("ggml_reshape_3d", [P, P] + [C.c_int64] * 3),
                  ("ggml_reshape_4d", [P, P] + [C.c_int64] * 4), ("ggml_argsort_top_k", [P, P, C.c_int]),
                  ("ggml_get_rows", [P, P, P]), ("ggml_sum_rows", [P, P]), ("ggml_clamp", [P, P, C.c_float, C.c_float]),
                  ("ggml_fill", [P, P, C.c_float]), ("ggml_set_rows", [P, P, P, P]), ("ggml_cont", [P, P])]:
        fn = getattr(base, f); fn.restype = P; fn.argtypes = at
    x = np.fromfile(d + "x.bin", np.float32); n = len(x) // E
    tl = new(F32, [E, n]); put(tl, x)
    probs = {1: lambda: base.ggml_soft_max(ctx, tl), 2: lambda: base.ggml_sigmoid(ctx, tl), 3: lambda: tl}[gating]()
    sel = probs
    if hasb:
        tb = new(F32, [E]); put(tb, np.fromfile(d + "w.bin", np.float32)); sel = base.ggml_add(ctx, probs, tb)
    if G > 1:
        per = E // G
        sg = base.ggml_reshape_3d(ctx, sel, per, G, n)
        gs = base.ggml_argsort_top_k(ctx, sg, 2)
        gs = base.ggml_get_rows(ctx, base.ggml_reshape_4d(ctx, sg, 1, per, G, n), gs)
        gs = base.ggml_reshape_2d(ctx, base.ggml_sum_rows(ctx, base.ggml_reshape_3d(ctx, gs, 2, G, n)), G, n)
        eg = base.ggml_argsort_top_k(ctx, gs, GU)
        sp = base.ggml_get_rows(ctx, sg, eg)
        sp = base.ggml_set_rows(ctx, base.ggml_fill(ctx, sg, -np.inf), sp, eg)
        sel = base.ggml_reshape_2d(ctx, sp, E, n)
    ids = base.ggml_argsort_top_k(ctx, sel, K)
    w = base.ggml_get_rows(ctx, base.ggml_reshape_3d(ctx, probs, 1, E, n), ids)
    if gating == 3:
        w = base.ggml_reshape_3d(ctx, base.ggml_soft_max(ctx, base.ggml_reshape_2d(ctx, w, K, n)), 1, K, n)
    if norm:
        w = base.ggml_reshape_2d(ctx, w, K, n)
        s = base.ggml_clamp(ctx, base.ggml_sum_rows(ctx, w), 6.103515625e-5, np.inf)
        w = base.ggml_reshape_3d(ctx, base.ggml_div(ctx, w, s), 1, K, n)
    if wscale != 0 and wscale != 1:
        w = base.ggml_scale(ctx, w, wscale)
    idc = base.ggml_cont(ctx, ids)
    g = base.ggml_new_graph(ctx)
    for t in (w, idc, probs):
        base.ggml_build_forward_expand(g, t)
    cpu.ggml_graph_compute_with_ctx(ctx, g, 2)
    get(w).tofile(d + "out.bin"); get(idc, np.int32).tofile(d + "ids.bin"); get(probs).tofile(d + "probs.bin")
elif op == "argsort":  # rows of N values x: ggml_argsort, descending (std::sort's order on ties); out.bin int32
    N = int(sys.argv[2]); x = np.fromfile(d + "x.bin", np.float32)
    base.ggml_argsort.restype = P; base.ggml_argsort.argtypes = [P, P, C.c_int]
    tx = new(F32, [N, len(x) // N]); put(tx, x)
    o = base.ggml_argsort(ctx, tx, 1); run(o)  # GGML_SORT_ORDER_DESC
    get(o, np.int32).tofile(d + "out.bin")
print("ok")
if op == "trig":
    libm = C.CDLL("libm.so.6")
    libm.cosf.restype = C.c_float; libm.cosf.argtypes = [C.c_float]
    libm.sinf.restype = C.c_float; libm.sinf.argtypes = [C.c_float]
    x = np.fromfile(d + "x.bin", np.float32)
    out = np.empty(2 * len(x), np.float32)
    for i, v in enumerate(x):
        out[2*i] = libm.cosf(float(v)); out[2*i+1] = libm.sinf(float(v))
    out.tofile(d + "out.bin")
if op == "expf":
    libm = C.CDLL("libm.so.6")
    libm.expf.restype = C.c_float; libm.expf.argtypes = [C.c_float]
    x = np.fromfile(d + "x.bin", np.float32)
    np.array([libm.expf(float(v)) for v in x], np.float32).tofile(d + "out.bin")
if op == "powf":
    libm = C.CDLL("libm.so.6")
    libm.powf.restype = C.c_float; libm.powf.argtypes = [C.c_float, C.c_float]
    x = np.fromfile(d + "x.bin", np.float32)
    np.array([libm.powf(float(x[2*i]), float(x[2*i+1])) for i in range(len(x)//2)], np.float32).tofile(d + "out.bin")
if op == "mm":  # weight from gguf file tensor name; x (n, K) f32; repack or not
    from gguf import GGUFReader
    model, name, n, rep = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
    rd = GGUFReader(model)
    ten = [t for t in rd.tensors if t.name == name][0]
    K, N = int(ten.shape[0]), int(ten.shape[1])
    wbytes = bytes(ten.data.tobytes())
    if len(sys.argv) > 7:  # a crop: the first ROWS rows, of their first BLOCKS blocks of 32
        rows, blocks = int(sys.argv[6]), int(sys.argv[7])
        rb, cb = len(wbytes) // N, len(wbytes) // N * 32 * blocks // K
        wbytes = b"".join(wbytes[r * rb:r * rb + cb] for r in range(rows))
        K, N = 32 * blocks, rows
    open(d + "w.bin", "wb").write(wbytes)
    if n == 0:
        print(K, N, int(ten.tensor_type)); sys.exit(0)
    x = np.fromfile(d + "x.bin", np.float32)
    for f, rt, at in [("ggml_backend_buft_alloc_buffer", P, [P, C.c_size_t]), ("ggml_backend_buffer_get_base", P, [P]),
                      ("ggml_backend_tensor_alloc", C.c_int, [P, P, P]), ("ggml_backend_tensor_set", None, [P, P, C.c_size_t, C.c_size_t]),
                      ("ggml_backend_tensor_get", None, [P, P, C.c_size_t, C.c_size_t]), ("ggml_backend_alloc_ctx_tensors", P, [P, P]),
                      ("ggml_backend_graph_compute", C.c_int, [P, P]), ("ggml_backend_cpu_buffer_type", P, [])]:
        lib = base if hasattr(base, f) else cpu
        fn = getattr(lib, f); fn.restype = rt; fn.argtypes = at
    cpu.ggml_backend_cpu_init.restype = P
    cpu.ggml_backend_cpu_set_n_threads.argtypes = [P, C.c_int]
    be = cpu.ggml_backend_cpu_init(); cpu.ggml_backend_cpu_set_n_threads(be, 2)
    wctx = base.ggml_init(IP(1 << 20, None, True))
    tw = base.ggml_new_tensor_2d(wctx, int(ten.tensor_type), K, N)
    if rep:
        rb = getattr(cpu, "_Z35ggml_backend_cpu_repack_buffer_typev"); rb.restype = P
        buft = rb()
    else:
        buft = (base if hasattr(base, "ggml_backend_cpu_buffer_type") else cpu).ggml_backend_cpu_buffer_type()
    sz = base.ggml_nbytes(tw) + 4096
    buf = base.ggml_backend_buft_alloc_buffer(buft, sz)
    base.ggml_backend_tensor_alloc(buf, tw, base.ggml_backend_buffer_get_base(buf))
    base.ggml_backend_tensor_set(tw, wbytes, 0, len(wbytes))
    xctx = base.ggml_init(IP(1 << 20, None, True))
    tx = base.ggml_new_tensor_2d(xctx, F32, K, n)
    to = base.ggml_mul_mat(xctx, tw, tx)
    base.ggml_backend_alloc_ctx_tensors(xctx, be)
    xb = x.tobytes(); base.ggml_backend_tensor_set(tx, xb, 0, len(xb))
    g = base.ggml_new_graph(xctx); base.ggml_build_forward_expand(g, to)
    base.ggml_backend_graph_compute(be, g)
    ob = C.create_string_buffer(N * n * 4); base.ggml_backend_tensor_get(to, ob, 0, N * n * 4)
    np.frombuffer(ob.raw, np.float32).tofile(d + "out.bin")
    print(K, N, int(ten.tensor_type))
if op == "f16":
    x = np.fromfile(d + "x.bin", np.float32)
    x.astype(np.float16).astype(np.float32).tofile(d + "out.bin")
if op == "logf":
    libm = C.CDLL("libm.so.6")
    libm.logf.restype = C.c_float; libm.logf.argtypes = [C.c_float]
    x = np.fromfile(d + "x.bin", np.float32)
    np.array([libm.logf(float(v)) for v in x], np.float32).tofile(d + "out.bin")
if op == "conv":  # Mamba-2's SSM_CONV from a zero state, ADD of the bias, SILU: x (n, C), taps w (C, K), bias q (C)
    n, Cc, K = map(int, sys.argv[2:5])
    base.ggml_ssm_conv.restype = P; base.ggml_ssm_conv.argtypes = [P, P, P]
    base.ggml_add.restype = P; base.ggml_add.argtypes = [P, P, P]
    base.ggml_silu.restype = P; base.ggml_silu.argtypes = [P, P]
    x = np.fromfile(d + "x.bin", np.float32).reshape(n, Cc)
    sx = np.concatenate([np.zeros((K - 1, Cc), np.float32), x]).T  # (C, K-1+n): ne0 time
    tx = new(F32, [K - 1 + n, Cc, 1]); put(tx, sx)
    tw = new(F32, [K, Cc]); put(tw, np.fromfile(d + "w.bin", np.float32))
    tb = new(F32, [Cc]); put(tb, np.fromfile(d + "q.bin", np.float32))
    o = base.ggml_silu(ctx, base.ggml_add(ctx, base.ggml_ssm_conv(ctx, tx, tw), tb)); run(o)
    get(o).tofile(d + "out.bin")  # (n, C)
if op == "scan":  # Mamba-2's SSM_SCAN from a zero state after ADD of dt's bias, then + x·D (MUL, ADD)
    # x (n, H·P), dt (n, H), B and C (n, G·N) in k.bin and v.bin as float32, A, D, dt bias in w.bin (3·H)
    # With E = 1 (Mamba-1's decays per state column) w.bin holds A as H·N values (head-major), then D and dt bias.
    n, H, Pp, G, N = map(int, sys.argv[2:7]); E = len(sys.argv) > 7 and sys.argv[7] == "1"
    base.ggml_ssm_scan.restype = P; base.ggml_ssm_scan.argtypes = [P] + [P] * 7 + [C.c_int]  # K: the states kept (1)
    base.ggml_add.restype = P; base.ggml_add.argtypes = [P, P, P]
    base.ggml_view_1d.restype = P; base.ggml_view_1d.argtypes = [P, P, C.c_int64, C.c_size_t]
    base.ggml_reshape_4d.restype = P; base.ggml_reshape_4d.argtypes = [P, P] + [C.c_int64] * 4
    w = np.fromfile(d + "w.bin", np.float32)
    wa, w = (w[:H * N], w[H * N:].reshape(2, H)) if E else (w[:H], w[H:].reshape(2, H))
    tx = new(F32, [Pp, H, n, 1]); put(tx, np.fromfile(d + "x.bin", np.float32))
    tdt = new(F32, [H, n, 1]); put(tdt, np.fromfile(d + "q.bin", np.float32))
    tB = new(F32, [N, G, n, 1]); put(tB, np.fromfile(d + "k.bin", np.float32))
    tC = new(F32, [N, G, n, 1]); put(tC, np.fromfile(d + "v.bin", np.float32))
    tA = new(F32, [N if E else 1, H]); put(tA, wa); tD = new(F32, [1, H]); put(tD, w[0]); tdb = new(F32, [H]); put(tdb, w[1])
    ts = new(F32, [N, Pp, H, 1]); put(ts, np.zeros(N * Pp * H, np.float32))
    ti = new(I32, [1]); put(ti, np.zeros(1, np.int32))
    ys = base.ggml_ssm_scan(ctx, ts, tx, base.ggml_add(ctx, tdt, tdb), tA, tB, tC, ti, 1)
    y = base.ggml_reshape_4d(ctx, base.ggml_view_1d(ctx, ys, n * H * Pp, 0), Pp, H, n, 1)
    o = base.ggml_add(ctx, y, base.ggml_mul(ctx, tx, tD))
    g = base.ggml_new_graph(ctx); base.ggml_build_forward_expand(g, o); base.ggml_build_forward_expand(g, ys)
    cpu.ggml_graph_compute_with_ctx(ctx, g, 2)
    np.concatenate([get(o), get(ys)[n * H * Pp:n * H * Pp + N * Pp * H]]).tofile(d + "out.bin")  # outputs, then the final state
if op == "wkv7":  # RWKV_WKV7 from a zero state: r, w, k, v, a, b (each n·H·D, token-major) one after another in x.bin
    n, H, D = map(int, sys.argv[2:5])
    base.ggml_rwkv_wkv7.restype = P; base.ggml_rwkv_wkv7.argtypes = [P] * 8
    x = np.fromfile(d + "x.bin", np.float32).reshape(6, n * H * D)
    ts = []
    for i in range(6):
        t = new(F32, [D, H, n, 1]); put(t, x[i]); ts.append(t)
    st = new(F32, [D * D * H, 1]); put(st, np.zeros(D * D * H, np.float32))
    o = base.ggml_rwkv_wkv7(ctx, *ts, st)
    run(o)
    get(o).tofile(d + "out.bin")  # the outputs, then the final state
if op in ("wkv6", "gla"):  # RWKV_WKV6 (r, k, v, w, u) or GATED_LINEAR_ATTN (r, k, v, w; SCALE) from a zero state:
    # r, k, v, w (each n·H·D, token-major), then u (H·D) for wkv6, one after another in x.bin
    n, H, D = map(int, sys.argv[2:5])
    x = np.fromfile(d + "x.bin", np.float32)
    m = n * H * D
    def t3(a):
        t = new(F32, [D, H, n, 1]); put(t, a); return t
    r, k, v, w = (t3(x[i * m:(i + 1) * m]) for i in range(4))
    st = new(F32, [D * D * H, 1]); put(st, np.zeros(D * D * H, np.float32))
    if op == "wkv6":
        base.ggml_rwkv_wkv6.restype = P; base.ggml_rwkv_wkv6.argtypes = [P] * 7
        u = new(F32, [D, H]); put(u, x[4 * m:4 * m + H * D])
        o = base.ggml_rwkv_wkv6(ctx, k, v, r, u, w, st)
    else:
        base.ggml_gated_linear_attn.restype = P; base.ggml_gated_linear_attn.argtypes = [P] * 6 + [C.c_float]
        o = base.ggml_gated_linear_attn(ctx, k, v, r, w, st, float(sys.argv[5]))
    run(o)
    get(o).tofile(d + "out.bin")  # the outputs, then the final state
if op == "gdn":  # Gated DeltaNet as llama.cpp's qwen35 builds it, from a zero state: q, k (n, HK·S) in gq.bin, gk.bin;
    # v (n, HV·S) in gv.bin; alpha and beta logits (n, HV) in ga.bin, gb.bin; a then dt's bias (2·HV) in gw.bin.
    # q, k: RMS_NORM with eps/S, SCALE 1/sqrt(S); beta = SIGMOID; g = MUL(SOFTPLUS(ADD(alpha, dt bias)), a); GATED_DELTA_NET.
    n, HK, HV, S = map(int, sys.argv[2:6]); eps = np.float32(float(sys.argv[6]))
    for f in ["add", "sigmoid", "softplus"]:
        fn = getattr(base, "ggml_" + f); fn.restype = P; fn.argtypes = [P, P, P] if f == "add" else [P, P]
    base.ggml_gated_delta_net.restype = P; base.ggml_gated_delta_net.argtypes = [P] * 7 + [C.c_int64]
    base.ggml_reshape_4d.restype = P; base.ggml_reshape_4d.argtypes = [P, P] + [C.c_int64] * 4
    w = np.fromfile(d + "gw.bin", np.float32).reshape(2, HV)
    def norm(f):
        t = new(F32, [S, HK, n, 1]); put(t, np.fromfile(d + f, np.float32))
        return base.ggml_scale(ctx, base.ggml_rms_norm(ctx, t, float(eps / np.float32(S))), float(np.float32(1) / np.sqrt(np.float32(S))))
    tv = new(F32, [S, HV, n, 1]); put(tv, np.fromfile(d + "gv.bin", np.float32))
    ta = new(F32, [HV, n]); put(ta, np.fromfile(d + "ga.bin", np.float32))
    tb = new(F32, [1, HV, n, 1]); put(tb, np.fromfile(d + "gb.bin", np.float32))
    tA = new(F32, [HV]); put(tA, w[0]); tdb = new(F32, [HV]); put(tdb, w[1])
    g = base.ggml_reshape_4d(ctx, base.ggml_mul(ctx, base.ggml_softplus(ctx, base.ggml_add(ctx, ta, tdb)), tA), 1, HV, n, 1)
    ts = new(F32, [S, S, HV, 1]); put(ts, np.zeros(S * S * HV, np.float32))
    o = base.ggml_gated_delta_net(ctx, norm("gq.bin"), norm("gk.bin"), tv, g, base.ggml_sigmoid(ctx, tb), ts, 1); run(o)
    r = get(o); st = r[n * HV * S:].reshape(HV, S, S)  # per head M[j][i] = S[i][j]
    np.concatenate([r[:n * HV * S], st.transpose(0, 2, 1).ravel()]).tofile(d + "out.bin")  # outputs, then the state as S[i][j]
