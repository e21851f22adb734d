// Package cli implements ppl-mkmodel, the test-model generator.
package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"ppl.dev/command"
	"ppl.dev/eval/bpe"
	"ppl.dev/eval/corpora"
	"ppl.dev/eval/corpus"
	"ppl.dev/eval/mkmodel"
)

const name = "ppl-mkmodel"

type cliArgs struct {
	Output string `short:"o" required:"" help:"The GGUF file to write (atomically)." placeholder:"FILE.gguf" type:"path"`

	Arch     string  `default:"llama" enum:"llama,qwen2,qwen3,qwen3moe,qwen35,qwen35moe,phi3,glm4,granite,smollm3,olmo2,seed_oss,exaone4,minimax-m2,ernie4_5-moe,dots1,granitehybrid,nemotron_h,nemotron_h_moe,lfm2,lfm2moe,gemma2,llama4,falcon-h1,cohere2,command-r,qwen2moe,olmoe,granitemoe,hunyuan-moe,bailingmoe2,ernie4_5,exaone,hunyuan-dense,arcee,afmoe,apertus,exaone-moe,cohere2moe,gemma3n,phimoe,gemma,internlm2,xverse,minicpm,deepseek,deci,nanbeige,orion,stablelm,starcoder2,phi2,gptneox,falcon,gpt2,nemotron,chatglm,olmo,dbrx,bailingmoe,granite_swa,mellum,baichuan,bloom,mpt,refact,jais,jais2,maincoder,pangu-embedded,mimo2,bitnet,openelm,qwen,step35,kimi-linear,smallthinker,mamba,mamba2,jamba,plamo3,plamo2,grok,minicpm3,plamo,arctic,rwkv7,arwkv7,rwkv6,rwkv6qwen2,hy_v3,maple,laguna,maion-coder,spark2_5,muse-glimmer,talkie,hunyuan_vl,plm,hrm_text,grovemoe,k2-horizon,graniteswitch,paddleocr,cogvlm,deepseek2-ocr,minimax-01,bailingmoe3,dots3note,hy_v4,kimi-k3,minimax-m3,qwen4exp,glm5-next" help:"Architecture: llama, qwen2, qwen3, qwen3moe, qwen35 or qwen35moe (Gated DeltaNet hybrids), phi3 (Phi-3, Phi-4) or glm4 (GLM-4-0414: fused projections), granite (Granite 3: llama with Granite-3.3-8B's multipliers), smollm3 (llama, no RoPE in every fourth layer), olmo2 (OLMo 2: norms after the attention and the FFN; OLMo 3 with --window and --yarn 8), seed_oss (Seed-OSS: q/k/v biases), exaone4 (EXAONE 4.0: olmo2's norms, q/k norms per head; 64 layers: 3 sliding-window layers of 4), minimax-m2 (MiniMax-M2: whole-row q/k norms, half-head RoPE, sigmoid-routed experts with a selection bias), ernie4_5-moe (ERNIE 4.5: a dense first layer, softmax-routed experts with a selection bias and a shared expert), dots1 (dots.llm1: qwen3's attention, a dense first layer, sigmoid-routed experts with a selection bias and a shared expert), smallthinker (SmallThinker: 3 layers of 4 sliding with RoPE of half the base, the fourth global without RoPE, experts routed from the layer's input, each a ReGLU), granitehybrid (Granite 4.0-H: Mamba-2 layers and every --attn-interval-th attention, without positions unless --rope; with --experts, softmax-routed experts and a shared expert), nemotron_h, nemotron_h_moe (Nemotron-H, Nemotron 3 Nano: blocks of Mamba-2, attention without positions, or ReLU² MLPs, by --layout; nemotron_h_moe's MLPs sigmoid-routed ReLU² experts and a shared one), lfm2, lfm2moe (LFM2, LFM2-8B-A1B: short convolutions of --ssm-conv taps and every --attn-interval-th layer attention; lfm2moe's FFNs after the first sigmoid-routed experts), gemma2 (Gemma 2: norms before and after the attention and the FFN, GeGLU, soft-capped attention scores and logits, every other layer a sliding window of --window, 4096 by default), llama4 (Llama 4: every fourth layer without RoPE, q/k RMS-normed after RoPE, sigmoid-routed experts weighted before their FFN and a shared expert, every --moe-step-th layer), falcon-h1 (Falcon-H1: attention and a Mamba-2 mixer side by side in every layer; --ssm-no-norm leaves out the mixers' grouped norm), cohere2 (Command R7B: attention and the MLP in parallel on LayerNormed rows, three layers of four a sliding window of --window, 4096 by default, with RoPE, the fourth global without positions; tied), command-r (Command R, Aya: cohere2's block, RoPE in every layer, no window), qwen2moe (Qwen1.5-MoE: qwen2's attention, softmax-routed experts not renormalized, a sigmoid-gated shared expert), olmoe (OLMoE: whole-row q/k norms, softmax-routed experts of --ffn), bailingmoe (Ling 1: softmax-routed experts, renormalized, and a shared expert in every layer), granite_swa (Granite 4.1: granite with attention sinks, 3 layers of 4 sliding over --window keys, 40 by default, with RoPE, the fourth global without), mellum (qwen3moe's block; with --window 3 layers of 4 sliding with RoPE of half the base), baichuan (Baichuan 2: llama, with RoPE only in files of 32 layers, as llama.cpp's 7B, and ALiBi in files of 40, as its 13B), bloom (BLOOM: the embeddings LayerNormed, gpt2's block without positions, ALiBi), mpt (MPT: LayerNorms and an ungated GELU MLP without biases, q, k and v fused, ALiBi), refact (Refact: llama with ALiBi instead of RoPE), jais (Jais: LayerNorms, q, k and v fused, a SwiGLU MLP, all with biases, scores by 1/head, ALiBi), jais2 (Jais 2: nemotron's block with every bias, RoPE over the whole head), maincoder (Maincoder: llama with q/k norms per head after RoPE), pangu-embedded (openPangu-Embedded: llama with NeoX RoPE and q/k/v biases), mimo2 (MiMo-V2-Flash: values two thirds of the key heads, NeoX RoPE over a third, 3 layers of 4 sliding over --window keys, 40 by default, with sinks, twice the KV heads and RoPE of half the base, the attention's output scaled, a dense first layer, sigmoid-routed experts with a selection bias; --head-dim a multiple of 6, 48 by default), bitnet (BitNet b1.58: llama with NeoX RoPE, RMS norms of the attention's output and of the MLP's activation before their projections, a scale per projection; tied), openelm (OpenELM: heads and MLP widths per layer, q, k and v fused, q/k norms per head, NeoX RoPE; tied), qwen (Qwen 1: llama with NeoX RoPE and q, k and v fused with a bias; as many KV heads as heads), step35 (Step-3.5-Flash: q/k norms per head, NeoX RoPE, a sigmoid gate per head on the attention, 3 layers of 4 sliding over --window keys, 40 by default, with half again as many heads and RoPE of half the base over the whole head, the fourth global with RoPE over half the head, a dense first layer, sigmoid-routed experts with a selection bias and a shared expert, their SwiGLUs clamped), kimi-linear (Kimi-Linear: 3 Kimi Delta Attention layers of 4, short convolutions of --ssm-conv taps, 4 by default, on q, k and v, a decay gate per key channel, the fourth latent attention without RoPE; a dense first layer, sigmoid-routed experts with a selection bias and a shared expert), granitemoe (Granite 3 MoE: granite's multipliers, experts of --ffn, a shared expert with --shared-ffn), hunyuan-moe (Hunyuan-A13B: q/k normed per head after RoPE, experts of --ffn and a shared expert), bailingmoe2 (Ling 2.0: fused attn_qkv, q/k norms, RoPE over part of the head, a dense first layer, sigmoid-routed experts in 4 groups with a selection bias and a shared expert), ernie4_5 (ERNIE-4.5-0.3B: llama), exaone (EXAONE 3.5: llama with NeoX RoPE), hunyuan-dense (Hunyuan dense: q/k normed per head after RoPE), arcee (AFM-4.5B: an ungated ReLU² MLP), afmoe (Arcee Trinity: pre- and post-norms, a gated attention, 3 layers of 4 sliding over --window keys, 40 by default, a dense first layer, sigmoid-routed experts with a selection bias and a shared expert), apertus (Apertus: q/k norms, an ungated MLP with xIELU, its parameters per layer), exaone-moe (K-EXAONE: q/k norms, 3 layers of 4 sliding over --window keys, 40 by default, the fourth global without RoPE, a dense first layer, sigmoid-routed experts with a selection bias and a shared expert), cohere2moe (Cohere's mixtures: cohere2's parallel block with RMS norms, every fourth layer from the first global, a dense first layer, sigmoid-routed experts and a shared expert, their sum halved; tied), gemma3n (Gemma 3n: 4 AltUp streams, LAuReL, per-layer inputs of 256, a sparse FFN gate in the first 10 layers, 4 layers of 5 sliding over --window keys, 40 by default, the layers from 20 on reading the KV of 18 and 19; 22 layers by default; tied), phimoe (Phi-3.5-MoE: biases on q, k, v, the attention's output, the norms and the output, softmax-routed experts of --ffn, phi3's RoPE and --orig-context), gemma (Gemma 1: Gemma 2's block without the post-norms, soft-caps and window; tied), internlm2, xverse and nanbeige (llama), orion (Orion-14B: llama with NeoX RoPE and LayerNorms with biases), stablelm (StableLM 2: orion's block with q/k/v biases and RoPE over a quarter of the head; --qk-norm: StableLM 2 12B's per-head q/k LayerNorms and parallel residual), starcoder2 (StarCoder2: orion's LayerNorms with biases, q/k/v and output biases, an ungated GELU MLP with biases), phi2 (Phi-2: starcoder2's block with the attention and the MLP in parallel on the same normed rows, RoPE over half the head, q scaled before the attention, an output bias), gptneox (Pythia, GPT-NeoX-20B: starcoder2's block with q, k and v fused, RoPE over a quarter of the head, the parallel residual: the MLP on its own norm of the layer's input), falcon (Falcon-7B: attention and an ungated GELU MLP without biases in parallel on one LayerNorm, q, k and v fused), gpt2 (GPT-2: starcoder2's block with q, k and v fused, learned positions for --context tokens instead of RoPE), nemotron (Minitron: LayerNorms with biases, an ungated ReLU² MLP, RoPE over half the head), chatglm (ChatGLM3, GLM-4-9B: glm4 without the post-norms), olmo (OLMo: llama with LayerNorms without weights), dbrx (DBRX: LayerNorms without biases, q, k and v fused and clamped at 8, softmax-routed experts of --ffn), minicpm (MiniCPM: llama with granite's multipliers at MiniCPM's values), deepseek (DeepSeek-MoE: a dense first layer, softmax-routed experts neither renormalized nor scaled, --shared-ffn of whole experts, 128 by default), deci (Llama-Nemotron: layers by --layout, a letter each: A attention and MLP, L linear attention and MLP, F the MLP alone, N attention alone; ALFNA by default), mamba (Mamba-1: mixers alone, of twice the width, a decay per state column; --dt-b-c-rms: Falcon-Mamba's norms of dt, B and C), mamba2 (Mamba-2: mixers alone), jamba (Jamba: Mamba-1 mixers with the norms' weights, every --attn-interval-th layer from the middle of the first attention without positions, 4 by default; with --experts, softmax-routed experts of --ffn in the odd layers), plamo3 (PLaMo 3: glm4's fused block without biases, per-head q/k norms before NeoX RoPE; with --window every other layer from the first sliding, with RoPE of half the base), plamo2 (PLaMo 2: PLaMo-2's Mamba layers, z and x interleaved by head, B, C and dt RMS-normed, and every --attn-interval-th layer, 2 by default, attention with q/k norms per head; pre- and post-norms), grok (Grok-2: experts of --expert-ffn, GELU-gated, beside a dense MLP of --ffn, with --shared-ffn 0 Grok-1's experts alone; norms after the attention and the FFN; Grok's multipliers and soft-caps), minicpm3 (MiniCPM3: latent attention in its plain form, key heads of --head-dim and half as many rotated values, values of --head-dim, a KV head per head; with --orig-context LongRoPE), plamo (PLaMo-13B: llama's attention with NeoX RoPE and MLP in parallel on one norm), arctic (Snowflake Arctic: a dense MLP as wide as the model, and beside each layer softmax-routed experts of --ffn reading its input), rwkv7 (RWKV-7: no attention; time mixing with a matrix state per head of --head-dim, 64 by default, and a ReLU² channel mix of --ffn, each on a blend of its LayerNormed input and the previous token's), arwkv7 (ARWKV: RWKV-7's time mix without its gate between RMS norms, and a SwiGLU MLP), rwkv6 (RWKV-6: RWKV-7's layout with RWKV-6's time mix, its decay and per-channel bonus, and a channel mix gated by its receptance), rwkv6qwen2 (QRWKV6: RWKV-6's time mix as gated linear attention over --kv-heads groups of keys and values, between RMS norms, and a SwiGLU MLP), hy_v3 (Hunyuan 3: dots1's block with grouped KV heads, the dense first layer told by its tensors, sigmoid routing by default), maple (qwen3moe's block, 3 layers of 4 sliding over --window keys, 40 by default, with RoPE of half the base, the fourth global without RoPE; experts' SwiGLU clamped at 7, softmax routing renormalized), laguna (Laguna XS.2: step35's layout without the clamps, a softplus gate per head, RoPE over half the head in the global layers, with --yarn YaRN there only), maion-coder (Maion-Coder: qwen3's attention between pre- and post-norms, 3 layers of 4 sliding over --window keys, 40 by default, the fourth global without RoPE; every second FFN softmax-routed experts at a latent width of half the model's), spark2_5 (Spark-X2.5: fused qkv, a sigmoid gate per head, 3 layers of 4 sliding over --window keys, 40 by default, with half again as many heads and RoPE of half the base over the whole head, the fourth global with RoPE over half the head; a GeGLU MLP), muse-glimmer (Muse Glimmer: the embeddings RMS-normed, per-head q/k norms, a sigmoid gate per element, pre- and post-norms, 3 layers of 4 sliding over --window keys, 40 by default, with RoPE of half the base, the fourth global without; the logits scaled and soft-capped), talkie (Talkie: llama's block without norm weights, q normed per head after RoPE times a gain per head, scalar gains on the attention's and the MLP's outputs, each layer's output plus the normed embeddings times a gain per layer, the logits scaled), hunyuan_vl (Hunyuan-VL's text decoder: hunyuan-dense's with its RoPE base times alpha^(d/(d-2)) for rope.scaling.alpha 8 and multimodal RoPE's sections), plm (PLM: minicpm3's latent attention with q = attn_q·x, no multipliers, an ungated ReLU² MLP, tied), hrm_text (HRM-Text: two stacks of half the --layers blocks without norm weights, with sigmoid gates per element, run twice each as L, H, L, H), grovemoe (GroveMoE: qwen3moe's block, each pair of experts with a chunk expert as wide as a head reading the experts' output, weighted by half), k2-horizon (K2-Horizon: norms over 2 groups of each row, per-head q/k norms, the attention's output times log2(1 + 2^(attn_gate·h)), a dense first layer, then sigmoid-routed experts with a selection bias and a shared expert, and values from 2 of 4 routed value experts, silu(W·x) each, all of them when every expert is used), graniteswitch (Granite Switch: granite's block and multipliers, q, k and v fused, a LoRA delta of rank 8 on every projection per token's slot, 2 adapters switched on by the vocabulary's last 2 tokens), paddleocr (PaddleOCR-VL's text decoder: ernie4_5's file with multimodal RoPE's sections), cogvlm (CogVLM's language model: q, k and v fused as width-sized thirds, NeoX RoPE of base 10000, a visual expert text does not use), deepseek2-ocr (DeepSeek-OCR's language model: deepseek's mixture with plain attention and NeoX RoPE), minimax-01 (MiniMax-Text-01: lightning attention in every layer but each --attn-interval-th, 2 by default, softmax attention with RoPE over half the head; the normed rows join the residual scaled; softmax-routed experts of --ffn), bailingmoe3 (Ling 3: kimi-linear's layout with KDA's safe gate, the output gate without its low rank, latent attention with RoPE and a sigmoid gate per head), dots3note (dots3-note: latent attention with q compression, its rope key normed and a sigmoid gate per head, every other layer from the first reading the keys a lightning indexer of 4 heads chooses (top_k 48), the others sliding over --window keys, 40 by default, with a narrower latent and RoPE of half the base; a dense first layer, sigmoid-routed experts with a selection bias and a shared expert), hy_v4 (Hunyuan 4: 4 residual streams reduced before and gated after each block, dots3note's full layers with attention sinks and an elementwise sigmoid gate, the odd layers reusing the previous layer's indexed keys; a dense first layer, sigmoid-routed experts with a selection bias, clamped, and a shared expert), kimi-k3 (Kimi K3: kimi-linear's layout with KDA's safe gate and a full-rank output gate, latent attention with q compression and an elementwise sigmoid gate, SiTU MLPs, routed experts at half the width, cross-layer residual attention over checkpoints banked every second layer), minimax-m3 (MiniMax-M3: per-head q/k norms, NeoX RoPE over half the head, gpt-oss's clamped SwiGLU in every MLP, a dense first layer, sigmoid-routed experts with a selection bias and a shared expert; sparse attention in the layers with experts, each KV head's queries reading the 4 blocks of 16 keys its indexer head scores highest, the last 2 always), qwen4exp (Qwen3.8-Flash-Next: qwen35moe's layers, Gated DeltaNet's output gate a sigmoid, without norms around 4 residual streams mixed by rank-16 hyper-connections; n-gram hash embeddings of 4 heads of --embd/4 in layer 1; sparse attention reading the 4 blocks of 4 keys a 2-head indexer scores highest and the keys after them), glm5-next (GLM-5.3-Flash: kimi-linear's hybrid inside 4 residual streams mixed by hyper-connections with a Sinkhorn-normalized matrix, the latent attention with q compression and sparse past a k-pool indexer: 4 heads scoring blocks of 4 keys pooled by a gated softmax, each query reading the best 4 and the keys after them; a dense first layer, sigmoid-routed experts with a selection bias, clamped, and a shared expert)."`
	Params   string  `help:"Pick the preset nearest this size (shape flags override its fields): Llama-shaped 100M, 1B or 8B; for qwen3moe, Qwen3-30B-A3B's layout at 1B or its own 30B; for qwen35, Qwen3.5-0.8B or 27B; for qwen35moe, Qwen3.5-35B-A3B; for rwkv7, RWKV-7 G1 0.1B, 1.5B, 2.9B or 7.2B." placeholder:"SIZE"`
	Embd     int     `help:"Embedding width (default 128, or the preset's)."`
	Layers   int     `help:"Number of transformer blocks (default 2)."`
	Heads    int     `help:"Attention heads (default 4)."`
	KVHeads  int     `name:"kv-heads" help:"Key/value heads (default 2)."`
	HeadDim  int     `name:"head-dim" help:"Dimension of one head (default 32)."`
	FFN      int     `name:"ffn" help:"Feed-forward width (default 256)."`
	Context  int     `help:"Context length written to the metadata (default 2048)."`
	RopeBase float64 `name:"rope-base" help:"RoPE frequency base (default 10000 for llama, 1000000 for qwen)."`
	Eps      float64 `help:"RMSNorm epsilon (default 1e-5 for llama, 1e-6 for qwen)."`
	Tied     bool    `help:"Tie the output matrix to the token embedding."`
	Untied   bool    `help:"Write a separate output matrix (overrides a tied preset)."`

	Experts     int `help:"The mixtures of experts: experts per layer (default 8); llama: makes it a mixture of experts in Mixtral's layout, of --ffn wide experts."`
	ExpertsUsed int `name:"experts-used" help:"The mixtures of experts: experts per token (default 2)."`
	ExpertFFN   int `name:"expert-ffn" help:"The mixtures of experts: an expert's feed-forward width (default 64; the experts of llama, minimax-m2, olmoe, granitemoe and hunyuan-moe are --ffn wide)."`
	SharedFFN   int `name:"shared-ffn" help:"The mixtures with a shared expert: its feed-forward width (default 64; granitemoe: none unless set)."`

	SSMState     int     `name:"ssm-state" help:"qwen35, qwen35moe: Gated DeltaNet head size (default 16); granitehybrid, mamba2: Mamba-2's state per head row (default 16); mamba, jamba: Mamba-1's state per channel (default 16)."`
	SSMKHeads    int     `name:"ssm-k-heads" help:"qwen35, qwen35moe: Gated DeltaNet query/key heads (default 2); granitehybrid, mamba2: Mamba-2's groups of B and C (default 1)."`
	SSMVHeads    int     `name:"ssm-v-heads" help:"qwen35, qwen35moe: Gated DeltaNet value heads, a multiple of the key heads (default 4); granitehybrid: Mamba-2's heads, a multiple of the groups (default 4; mamba2 8)."`
	SSMHeadDim   int     `name:"ssm-head-dim" help:"granitehybrid, mamba2: Mamba-2's head size (default 32)."`
	SSMConv      int     `name:"ssm-conv" help:"qwen35, qwen35moe, granitehybrid, nemotron_h, mamba, mamba2, jamba: convolution kernel (default 4); lfm2: its short convolution's taps, shortconv.l_cache (default 3)."`
	AttnInterval int     `name:"attn-interval" help:"qwen35, qwen35moe, granitehybrid, lfm2, minimax-01: every N-th layer is full attention, the others recurrent (default 4; granitehybrid, lfm2 and minimax-01 2); jamba: every N-th from the N/2-th (default 4)."`
	Rope         bool    `help:"granitehybrid: RoPE in the attention layers (default none, as Granite 4.0-H)."`
	SSMNoNorm    bool    `name:"ssm-no-norm" help:"falcon-h1: mixers without ssm_norm (the gate alone)."`
	DtBCRMS      bool    `name:"dt-b-c-rms" help:"mamba: Falcon-Mamba's RMS norms of dt, B and C, without weights (ssm.dt_b_c_rms)."`
	QKNorm       bool    `name:"qk-norm" help:"command-r: Command R+'s LayerNorms of each head of q and k; stablelm: StableLM 2 12B's, with its parallel residual."`
	Layout       string  `help:"nemotron_h, nemotron_h_moe: the blocks, a letter a layer: M (Mamba-2), A (attention), F (MLP or experts); sets --layers (default MAF). deci: A (attention, MLP), L (linear attention, MLP), F (MLP), N (attention; llama.cpp skips the layer) (default ALFNA: llama.cpp 0.7.0 crashes on a file whose last layer is N)."`
	MoEStep      int     `name:"moe-step" help:"llama4: every N-th layer a mixture of experts, the others dense (interleave_moe_layer_step; default 1)."`
	MoELatent    int     `name:"moe-latent" help:"nemotron_h_moe: the experts' latent width, moe_latent_size, as Nemotron 3 Super (default none)."`
	RopeDims     int     `name:"rope-dims" help:"qwen35, qwen35moe: rotated dimensions per head (default a quarter of the head); phi3, glm4: the same (default the whole head, half for glm4)."`
	Window       int     `name:"window" help:"exaone4: attention.sliding_window, the window of its sliding layers when it has 64 (default none: llama.cpp's 4096); gemma2: its sliding layers' window (default 4096); olmo2: OLMo 3's window, 3 sliding layers of every 4 (default none: OLMo 2)."`
	YaRN         float64 `name:"yarn" help:"olmo2, llama, qwen3, laguna (its global layers): YaRN RoPE scaling by this integer factor over an original context of --context/factor (OLMo 3: 8; default none)."`
	OrigContext  int     `name:"orig-context" help:"phi3, phimoe: LongRoPE's original context, below --context (writes rope_factors_long and rope_factors_short; default none)."`

	VocabFrom string `name:"vocab-from" help:"Copy the tokenizer (every tokenizer.* key) from this GGUF model." placeholder:"FILE.gguf" type:"existingfile"`
	BPETrain  string `name:"bpe-train" help:"Train a byte-level BPE vocabulary on this corpus (a manifest.json, or a text file); default: the bundled ppl-heldout-v1." placeholder:"CORPUS"`
	VocabSize int    `name:"vocab-size" help:"Vocabulary size for --bpe-train, <|endoftext|> and reserved tokens included (default 2048, or the preset's)."`

	Bigram   string  `help:"Set the embedding and output matrices from the bigram statistics of this corpus (manifest.json or text file) and make the blocks near-identity." placeholder:"CORPUS"`
	Rank     int     `help:"Rank of the bigram factorization (default embd-2, the most that fits)."`
	Refine   int     `default:"20" help:"Likelihood refinement steps after the SVD (--bigram)."`
	Residual float64 `default:"-1" help:"Scale of the weights writing into the residual stream (default 1, or 0.001 with --bigram)."`

	Type string `default:"F16" help:"Weight type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K; low-bit (always pure): IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0."`
	Pure bool   `help:"Give every 2-D tensor the base type, without llama.cpp's per-tensor rules."`
	Seed uint64 `default:"1" help:"Random seed; the file depends only on the flags."`
	Name string `help:"general.name (default: the output file's name without .gguf)."`
}

const description = "Generate a GGUF test model: random weights of any shape and type, or the meaningful bigram demo model."

// Main runs ppl-mkmodel with os.Args and returns its exit status.
func Main() int {
	return Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
}

// Run is Main with explicit arguments and output.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command.Exit(name, run(ctx, args, stdout, stderr), stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var a cliArgs
	if err := command.Parse(name, "", description, &a, args, stdout, stderr); err != nil {
		return err
	}
	cfg, report, err := a.config(ctx, stderr)
	if err != nil {
		return err
	}
	if err := mkmodel.Write(a.Output, cfg); err != nil {
		return err
	}
	st, err := os.Stat(a.Output)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: wrote %s: %s, %s parameters, %s, %d bytes%s\n", name, a.Output, cfg.Arch,
		mkmodel.FormatCount(cfg.Params()), cfg.Type.Name, st.Size(), report)
	return nil
}

// config turns the flags into a model configuration.
func (a *cliArgs) config(ctx context.Context, log io.Writer) (*mkmodel.Config, string, error) {
	ft, err := mkmodel.LookupFileType(a.Type)
	if err != nil {
		return nil, "", command.UsageError{Msg: err.Error()}
	}
	ft.Pure = a.Pure
	s := mkmodel.Shape{Arch: a.Arch, Embd: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 2048,
		RopeBase: 10000, Eps: 1e-5}
	if a.Arch == "qwen2" || a.Arch == "qwen3" || a.Arch == "qwen3moe" || a.Arch == "grovemoe" || a.Arch == "qwen35" || a.Arch == "qwen35moe" || a.Arch == "qwen4exp" {
		s.RopeBase, s.Eps = 1e6, 1e-6
	}
	if a.Arch == "qwen3moe" || a.Arch == "grovemoe" || a.Arch == "qwen35moe" || a.Arch == "minimax-m2" || a.Arch == "ernie4_5-moe" || a.Arch == "dots1" || a.Arch == "hy_v3" || a.Arch == "mellum" || a.Arch == "maple" || a.Arch == "maion-coder" {
		s.Experts, s.ExpertsUsed, s.ExpertFFN = 8, 2, 64
	}
	if a.Arch == "qwen35" || a.Arch == "qwen35moe" || a.Arch == "qwen4exp" { // 4 layers: the fourth attention (llama.cpp 0.7.0 crashes on a hybrid without one)
		s.Layers, s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMConv, s.AttnInterval, s.RopeDims = 4, 16, 2, 4, 4, 4, 8
	}
	if a.Arch == "granitehybrid" {
		s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.AttnInterval, s.NoPE = 16, 1, 4, 32, 4, 2, !a.Rope
	}
	if a.Arch == "falcon-h1" {
		s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.SSMNoNorm = 16, 1, 4, 32, 4, a.SSMNoNorm
	} else if a.SSMNoNorm {
		return nil, "", command.Usagef("--ssm-no-norm is for falcon-h1")
	}
	switch a.Arch {
	case "mamba", "jamba":
		s.SSMState, s.SSMConv, s.DtBCRMS = 16, 4, a.DtBCRMS
		if a.Arch == "jamba" {
			s.Layers, s.AttnInterval = 4, 4
		}
	case "mamba2": // d_inner = 8 heads of 32: twice the width, as llama.cpp requires
		s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv = 16, 1, 8, 32, 4
	case "plamo2":
		s.SSMState, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.AttnInterval = 16, 4, 32, 4, 2
	case "minicpm3": // a KV head per head
		s.KVHeads = s.Heads
	case "plm": // a KV head per head, tied
		s.KVHeads, s.Tied = s.Heads, true
	case "rwkv7", "arwkv7", "rwkv6", "rwkv6qwen2": // heads of 64, the size of RWKV's
		s.HeadDim = 64
		s.Heads, s.KVHeads = s.Embd/s.HeadDim, s.Embd/s.HeadDim
	case "arctic": // experts of --ffn
		s.Experts, s.ExpertsUsed = 8, 2
	case "grok": // Grok-2's dense MLP beside the experts
		s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, 128, s.FFN
	}
	if a.DtBCRMS && a.Arch != "mamba" {
		return nil, "", command.Usagef("--dt-b-c-rms is for mamba")
	}
	if a.QKNorm && a.Arch != "command-r" && a.Arch != "stablelm" {
		return nil, "", command.Usagef("--qk-norm is for command-r and stablelm")
	}
	s.QKLayerNorm = a.QKNorm
	if a.Arch == "cohere2moe" {
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 1, 8, 2, 64, 64
	}
	if a.Arch == "gemma2" || a.Arch == "gemma" || a.Arch == "cohere2" || a.Arch == "command-r" || a.Arch == "cohere2moe" || a.Arch == "bitnet" || a.Arch == "openelm" {
		s.Tied = true // llama.cpp's gemma2 reads no output matrix
	}
	if a.Arch == "llama4" {
		s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.MoEStep = 8, 1, 64, 64, a.MoEStep
	} else if a.MoEStep != 0 {
		return nil, "", command.Usagef("--moe-step is for llama4")
	}
	if a.Arch == "lfm2" || a.Arch == "lfm2moe" {
		s.SSMConv, s.AttnInterval = 3, 2
		if a.Arch == "lfm2moe" {
			s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN = 1, 8, 2, 64
		}
	}
	if a.Arch == "nemotron_h" || a.Arch == "nemotron_h_moe" {
		s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.Layout = 16, 1, 4, 32, 4, cmp.Or(a.Layout, "MAF")
		s.Layers = len(s.Layout)
		if a.Arch == "nemotron_h_moe" {
			s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, 64, 64
		}
	} else if a.Arch == "deci" {
		s.Layout = cmp.Or(a.Layout, "ALFNA")
		s.Layers = len(s.Layout)
	} else if a.Layout != "" {
		return nil, "", command.Usagef("--layout is for nemotron_h, nemotron_h_moe and deci")
	}
	if a.Arch == "qwen35moe" || a.Arch == "ernie4_5-moe" || a.Arch == "dots1" || a.Arch == "hy_v3" {
		s.SharedFFN = 64
	}
	if a.Arch == "ernie4_5-moe" || a.Arch == "dots1" || a.Arch == "hy_v3" {
		s.DenseLead = 1
	}
	if a.Arch == "dots1" || a.Arch == "qwen" { // llama.cpp's dots1 and qwen have no grouped-query attention
		s.KVHeads = s.Heads
	}
	switch a.Arch { // the mixtures of mkmodel/moe.go
	case "qwen2moe", "hunyuan-moe", "bailingmoe":
		s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, 64, 64
	case "olmoe", "granitemoe":
		s.Experts, s.ExpertsUsed, s.ExpertFFN = 8, 2, 64
		if a.Arch == "olmoe" { // its k norm spans the width
			s.KVHeads = s.Heads
		}
	case "bailingmoe2":
		s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.RopeDims = 1, 8, 2, 64, 64, 16
		s.ExpertGroups, s.ExpertGroupsUsed = 4, 2
	case "exaone-moe": // a global layer after 3 sliding ones
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
	case "afmoe": // a global layer after 3 sliding ones
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
	case "phimoe":
		s.Experts, s.ExpertsUsed, s.ExpertFFN = 8, 2, 64
	case "dbrx": // DBRX's 16 experts, 4 used, as wide as --ffn
		s.Experts, s.ExpertsUsed = 16, 4
	case "mimo2": // values of 32 for keys of 48, a global layer after 3 sliding ones
		s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.HeadDim, s.Window = 1, 8, 2, 64, 48, 40
	case "smallthinker": // a global layer without RoPE, then 3 sliding ones
		s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 8, 2, 64
	case "kimi-linear", "bailingmoe3", "kimi-k3": // 3 KDA layers, then MLA
		s.Layers, s.SSMConv, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 4, 1, 8, 2, 64, 64
	case "hy_v4": // indexing and reusing layers in turn, a dense first layer
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 1, 8, 2, 64, 64
	case "dots3note": // indexed and sliding layers in turn, a dense first layer
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
	case "cogvlm": // q, k and v as width-sized thirds of attn_qkv
		s.KVHeads = s.Heads
	case "deepseek2-ocr": // a KV head per head filling the width, two shared experts
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.KVHeads = 3, 1, 8, 2, 64, 128, s.Heads
	case "minimax-01": // lightning attention, then softmax attention over half of each head; experts of --ffn
		s.Layers, s.AttnInterval, s.RopeDims, s.Experts, s.ExpertsUsed = 4, 2, 16, 8, 2
	case "maple": // 3 sliding layers of 4, then a global one
		s.Window = 40
	case "llama4": // 4 layers: the fourth without RoPE (llama.cpp 0.7.0 crashes on 2)
		s.Layers = 4
	case "granite_swa": // the window its help promises; llama.cpp requires the sliding pattern it brings
		s.Window = 40
	case "maion-coder": // 3 sliding layers of 4, then a global one; experts in every second
		s.Window = 40
	case "spark2_5": // a global layer, then 3 sliding ones
		s.Layers, s.Window = 4, 40
	case "muse-glimmer": // 3 sliding layers of 4, then a global one
		s.Layers, s.Window = 4, 40
	case "step35", "laguna": // a global layer, then 3 sliding ones
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
	case "qwen4exp": // 3 Gated DeltaNet layers (PLE in the second), then attention with QSA; experts and a shared one
		s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 8, 2, 64, 64
	case "minimax-m3": // a dense first layer, then experts, a shared one and MSA
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 1, 8, 2, 64, 64
	case "k2-horizon": // a dense first layer, then experts, a shared one and MoVA's values
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 1, 8, 2, 64, 64
	case "deepseek": // two shared experts
		s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 1, 8, 2, 64, 128
	case "gemma3n": // llama.cpp's per-layer width; layers past its 20 with KV of their own
		s.Layers, s.PerLayer, s.Window, s.Tied = 22, 256, 40, true
	}
	presetVocab := 0
	if a.Params != "" {
		n, err := mkmodel.ParseCount(a.Params)
		if err != nil {
			return nil, "", command.UsageError{Msg: err.Error()}
		}
		pr := mkmodel.NearestPreset(a.Arch, n)
		arch := s.Arch
		s = pr.Shape
		s.Arch = arch
		presetVocab = s.Vocab
		fmt.Fprintf(log, "%s: --params %s: preset %s (%s parameters with its own vocabulary)\n", name, a.Params, pr.Name, mkmodel.FormatCount(pr.Shape.Params()))
	}
	set := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	set(&s.Embd, a.Embd)
	if s.Layout != "" && a.Layers != 0 && a.Layers != len(s.Layout) {
		return nil, "", command.Usagef("--layers %d and --layout %q (%d layers) contradict each other", a.Layers, s.Layout, len(s.Layout))
	}
	set(&s.Layers, a.Layers)
	set(&s.Heads, a.Heads)
	set(&s.KVHeads, a.KVHeads)
	set(&s.HeadDim, a.HeadDim)
	set(&s.FFN, a.FFN)
	set(&s.Context, a.Context)
	set(&s.Experts, a.Experts)
	set(&s.ExpertsUsed, a.ExpertsUsed)
	set(&s.ExpertFFN, a.ExpertFFN)
	set(&s.SharedFFN, a.SharedFFN)
	set(&s.SSMState, a.SSMState)
	set(&s.SSMKHeads, a.SSMKHeads)
	set(&s.SSMVHeads, a.SSMVHeads)
	set(&s.SSMHeadDim, a.SSMHeadDim)
	set(&s.SSMConv, a.SSMConv)
	set(&s.AttnInterval, a.AttnInterval)
	if (s.Arch == "kimi-linear" || s.Arch == "bailingmoe3" || s.Arch == "kimi-k3" || s.Arch == "dots3note" || s.Arch == "hy_v4") && a.SharedFFN == 0 { // its shared expert is as wide as an expert (llama.cpp: n_ff_exp · count)
		s.SharedFFN = s.ExpertFFN
	}
	if s.Arch == "granitehybrid" && a.SSMVHeads == 0 { // Mamba-2's inner width twice the model's, which llama.cpp 0.7.0 asserts
		s.SSMVHeads = 2 * s.Embd / s.SSMHeadDim
	}
	if s.Arch == "qwen4exp" { // the PLE heads' rows side by side make the width
		s.PerLayer = s.Embd / mkmodel.Q4PLEHeads
	}
	if a.HeadDim != 0 && a.RopeDims == 0 && s.RopeDims != 0 {
		s.RopeDims = s.HeadDim / 4 &^ 1
	}
	set(&s.RopeDims, a.RopeDims)
	if s.Arch == "minimax-m2" || s.Arch == "olmoe" || s.Arch == "granitemoe" || s.Arch == "hunyuan-moe" || s.Arch == "phimoe" || s.Arch == "dbrx" || s.Arch == "arctic" || s.Arch == "minimax-01" { // llama.cpp shapes their experts by feed_forward_length
		s.ExpertFFN = s.FFN
	}
	if (s.Arch == "llama" || s.Arch == "granitehybrid" || s.Arch == "jamba") && s.Experts > 0 { // experts of --ffn (Mixtral's, Granite's, Jamba's layout)
		if s.ExpertsUsed == 0 {
			s.ExpertsUsed = 2
		}
		if s.ExpertFFN == 0 {
			s.ExpertFFN = s.FFN
		}
		if s.Arch == "granitehybrid" && s.SharedFFN == 0 {
			s.SharedFFN = 64
		}
	}
	if a.Rope && s.Arch != "granitehybrid" {
		return nil, "", command.Usagef("--rope is for granitehybrid (the other architectures always rotate)")
	}
	set(&s.OrigContext, a.OrigContext)
	set(&s.Window, a.Window)
	if a.YaRN != 0 {
		s.YaRN = a.YaRN
	}
	set(&s.MoELatent, a.MoELatent)
	if a.RopeBase != 0 {
		s.RopeBase = a.RopeBase
	}
	if a.Eps != 0 {
		s.Eps = a.Eps
	}
	switch {
	case a.Tied && a.Untied:
		return nil, "", command.Usagef("--tied and --untied contradict each other")
	case a.Tied:
		s.Tied = true
	case a.Untied:
		s.Tied = false
	}
	if a.Bigram != "" && s.Tied {
		return nil, "", command.Usagef("--bigram needs an untied output matrix")
	}
	if a.VocabFrom != "" && (a.BPETrain != "" || a.VocabSize != 0 || a.Bigram != "") {
		return nil, "", command.Usagef("--vocab-from cannot be combined with --bpe-train, --vocab-size or --bigram")
	}

	cfg := &mkmodel.Config{Type: ft, Seed: a.Seed, Name: a.Name, Residual: a.Residual}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(a.Output), ".gguf")
	}
	report := ""
	if a.VocabFrom != "" {
		if cfg.Tokenizer, err = mkmodel.TokenizerFrom(a.VocabFrom); err != nil {
			return nil, "", err
		}
	} else {
		size := a.VocabSize
		if size == 0 {
			size = presetVocab
		}
		if size == 0 {
			size = 2048
		}
		trainSpec := a.BPETrain
		if trainSpec == "" {
			trainSpec = a.Bigram
		}
		texts, err := readTexts(trainSpec)
		if err != nil {
			return nil, "", err
		}
		voc, err := bpe.Train(texts, bpe.TrainOptions{Size: size, Special: []string{"<|endoftext|>"}})
		if err != nil {
			return nil, "", err
		}
		if cfg.Tokenizer, err = mkmodel.BPETokenizer(voc); err != nil {
			return nil, "", err
		}
		if a.Bigram != "" {
			bt := texts
			if a.Bigram != trainSpec {
				if bt, err = readTexts(a.Bigram); err != nil {
					return nil, "", err
				}
			}
			var seqs [][]int32
			for _, t := range bt {
				seqs = append(seqs, voc.Encode(t))
			}
			rank := a.Rank
			if rank == 0 {
				rank = s.Embd - 2
			}
			g, nll, err := mkmodel.TrainBigram(voc.Size(), seqs, mkmodel.BigramOptions{Rank: rank, Refine: a.Refine, Seed: a.Seed})
			if err != nil {
				return nil, "", err
			}
			if cfg.Embed, cfg.Output, err = g.Embeddings(s.Embd); err != nil {
				return nil, "", command.UsageError{Msg: err.Error()}
			}
			report = fmt.Sprintf("; bigram rank %d, %d normal tokens, training NLL %.4f per token", rank, voc.NumNormal(), nll)
			if cfg.Residual < 0 {
				cfg.Residual = 0.001
			}
		}
	}
	if cfg.Residual < 0 {
		cfg.Residual = 1
	}
	s.Vocab = cfg.Tokenizer.NVocab
	cfg.Shape = s
	if err := cfg.Check(); err != nil {
		return nil, "", command.UsageError{Msg: err.Error()}
	}
	_ = ctx
	return cfg, report, nil
}

// readTexts reads a corpus: every stream of a manifest.json (checked
// against its sha256), or one text file; "" is the bundled ppl-heldout-v1.
func readTexts(spec string) ([][]byte, error) {
	if spec == "" {
		m, err := corpora.Heldout()
		if err != nil {
			return nil, err
		}
		return m.Texts(false)
	}
	if strings.HasSuffix(spec, ".json") {
		m, err := corpus.Load(spec)
		if err != nil {
			return nil, err
		}
		return m.Texts(false)
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		return nil, err
	}
	return [][]byte{b}, nil
}
