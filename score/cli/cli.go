// Package cli implements ppl-score, the third stage of the ppl pipeline: it
// runs the model over each window and writes the log-probability of every
// target token.
//
//	ppl-tokenize ... | ppl-window ... | ppl-score --model m.gguf [flags] [FILE] | ppl-aggregate
//
// # Input and output
//
// ppl-score reads ppl-window output from FILE, or standard input when FILE
// is absent or "-" (.zst: zstd-compressed). It writes every input record
// through unchanged, adds its header after the upstream headers, a scores
// record right after each window record, and its end record last.
//
// For a window [begin, end) scored from s, the scores record holds
// logprobs[j] = log p(x[s+j] | x[begin..s+j)), a float64 log-softmax over
// the whole vocabulary, and argmax[j], the model's most likely token there.
// With --reference REF.gguf, the same windows are scored by REF as well and
// each target also gets kld[j] = KL(REF || model), ref_logprobs[j] and
// top1_agree[j]: the cost of a quantization without a logits file.
//
// --kld-base BASE takes the reference from a file of llama-perplexity
// --kl-divergence-base instead (package llamakld): the reference's
// log-probabilities as that file stores them, 16 bits each, and kld,
// ref_logprobs and top1_agree computed from them as llama-perplexity
// --kl-divergence computes them (KL over the tokens whose base log-prob
// is above -16), so that with --activations int8 --kv-dtype f16 the report
// gives its figures. The windows must be the file's chunks: the llama.cpp
// protocol at its context over the text it was made from (ppl-score
// checks every token against the file's). --write-kld-base FILE writes
// such a file of the model's log-probabilities as the windows are scored
// (the llama.cpp protocol over one text; every window is computed, none
// replayed from the cache, and the file appears only once all are in it),
// for --kld-base or for llama-perplexity --kl-divergence; with
// --activations int8 --kv-dtype f16 on the CPU it is byte for byte the
// file llama-perplexity writes.
// A window with "bos":true (the llama.cpp protocol) has its first token
// replaced by the model's BOS when the model's tokenizer adds BOS.
//
// The model must have the tokenizer that made the tokens: ppl-score checks
// its tokenizer identity against the tokenize header and refuses a
// mismatch, as it refuses a reference model with another tokenizer.
//
// # Example
//
//	ppl-tokenize --model m.gguf --text a.txt | ppl-window --context 512 \
//	  | ppl-score --model m.gguf --kv-dtype int8 > scores.ndjson
//
// # Flags
//
// --model M.gguf is required. --kv-dtype chooses how the attention cache
// stores keys and values: f32 (exact), f16, bf16 (default), int8, fp8,
// k8v4, nvfp4; llama.cpp's cache types q8_0, q4_0, q4_1, q5_0, q5_1,
// iq4_nl (as its -ctk X -ctv X, blocks of 32 along each head); rk8v4,
// rk4v4, rk2v4 (keys rotated per head by a Walsh-Hadamard transform, then
// 8-, 4- or 2-bit; values as k8v4's; the head size must be a power of
// two). On the CPU each format is simulated exactly as the GPU stores it
// (package ppl.dev/score/kvcache documents the byte layouts).
// --reference-kv-dtype sets the reference model's (default: --kv-dtype).
//
// RoPE (each value finite and positive): --rope-freq-base overrides the
// model's base. --rope-scaling-factor F divides positions by F (linear
// scaling). --rope-yarn turns on YaRN with the
// factor context/native, where context is the window protocol's and native
// is --rope-scaling-original-context (default: the model's training context);
// --rope-yarn-factor F sets the factor explicitly.
//
// --activations fp32|int8|int8-avx2, on the CPU: fp32 (the default)
// keeps activations in float32 and decodes quantized weights to float32 for
// each product (within about 1e-6 of float64 per log-prob); int8 is
// llama.cpp's CPU arithmetic: activations quantized to 8 bits as llama.cpp
// quantizes them, integer products with the weights' integers, and every
// float32 operation in ggml-cpu's order (RMSNorm, RoPE with glibc's
// sinf/cosf, SwiGLU, flash attention over an f16 cache, the products of
// every weight type), which gives llama-perplexity's log-probs to the bit with
// --kv-dtype f16 as its build for AVX-512 machines computes them;
// int8-avx2 as its build for AVX2 machines does (the two builds' digits
// differ); int8-amx as its build for CPUs with AMX-INT8 does (Debian's
// sapphirerapids backend, loaded on Intel Xeons from Sapphire Rapids on:
// the AVX-512 build, but the matrices of Q4_0, Q4_1, Q8_0, Q4_K, Q5_K,
// Q6_K, IQ4_XS and F16 it places in its AMX buffer multiplied in its AMX
// kernels' order; on such a CPU ppl-score says so in int8 and int8-avx2).
// On a GPU, fp32 is its half-precision products and int8 the same
// 8-bit activations and integer products (on the integer tensor cores,
// with the float32 operations between products its own, not ggml-cpu's);
// int8-avx2 and int8-amx are the CPU's only. The header and the cache keys
// record the mode.
//
// --ssm-state-dtype f32|f16|bf16 chooses the dtype the recurrent state of
// Gated DeltaNet and Kimi Delta Attention layers (qwen35, qwen35moe,
// qwen3next, kimi-linear) is rounded to after each chunk of 64 tokens, and
// that of Mamba's selective scans (mamba, mamba2, jamba, granitehybrid,
// nemotron_h, falcon-h1) after each token: f32 (the default), or f16 or
// bf16 to measure what a lower-precision state costs. Models with such layers record it in
// the header and the cache keys; RWKV's (rwkv6, rwkv6qwen2, rwkv7, arwkv7),
// whose state llama.cpp keeps in float32, refuse f16 and bf16; others
// ignore it.
//
// -o FILE (--output) writes to FILE instead of standard output,
// atomically (zstd-compressed when FILE ends in .zst), as every ppl tool's
// -o does; an interrupted run leaves no partial FILE.
//
// --threads N (default: all cores). --device auto|cpu|cuda|cuda:N: auto
// (the default) scores on the first CUDA GPU when the machine has a usable
// one and on the CPU otherwise, saying why on stderr; cuda or cuda:N fails
// when there is no such GPU. On a GPU, each weight is rounded once to fp16
// and products take fp16 inputs, or with --activations int8 8-bit
// activations and the weights' integers (package ppl.dev/score/cuda);
// --gpu-weights quantized (the default) keeps the file's blocks on the GPU
// and dequantizes them at each product, bf16 uploads a bf16 copy made on
// the host (more memory, the same numbers); the
// header records the GPU, its driver and CUDA versions and the precision,
// and the end of the log the peak GPU memory. --devices 0,1,2,3 loads the
// model (and the reference) once per listed device of --device's kind
// (cuda when --device is auto) and deals the windows to whichever engine is
// free; the output is written in input order and holds the same numbers as
// one engine's (an index may repeat, for two engines on one device; CPU
// engines share --threads; GPUs that would compute differently, another
// model or driver, are refused). Engines on one GPU share its copy of the
// weights; a model that does not fit one GPU, or any with --spread-weights,
// has one copy spread over the listed GPUs, each engine reading the others'
// share (peer access), with the same numbers. --reference-device DEV puts the reference on
// another device of the model's kind (cuda:N): the two forward passes run
// at once and the reference's logits are copied to the model's GPU, with
// the same numbers as on one device (a 16-bit reference that does not fit
// beside the model); with --devices, --reference-devices N,N,... gives one
// index per engine, engine i's reference on the i-th. The CPU has one
// device: --reference-device cpu changes nothing. The header records
// where the reference ran. --cache-dir DIR (default $PPL_CACHE_DIR, else the user cache
// directory) keeps every scored window, keyed by the model's sha256, the
// window's tokens and every setting that changes numbers: a rerun replays
// them, and an interrupted run resumes where it stopped. A replayed entry
// is checked as an input scores record is (and bound to its key); a bad one
// is reported, removed and scored again. --no-cache turns the cache off. --log-level debug|info|warn|error (default info).
//
// # Exit status
//
// 0 on success; 2 for a usage error; 1 on failure, with one line naming the
// input line, window or file at fault. Each scores record is flushed as it
// is made: when downstream has gone, the first failed write stops the run. SIGINT or SIGTERM (Ctrl-C) stops
// after the current window, or at once while a model is hashed or loaded,
// and exits 130 (SIGINT) or 143 (SIGTERM); the scored windows stay cached
// and rerunning the same command resumes. A second signal stops at once.
// After the first, a write to a reader that is gone (the whole pipeline
// was interrupted) fails rather than killing ppl-score with SIGPIPE, so
// the resume hint is always said. A --model that is not a regular file
// (a FIFO) is refused.
package cli

import (
	"context"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"

	"ppl.dev/command"
	"ppl.dev/pipe"
	"ppl.dev/score/backend"
)

const tool = "ppl-score"

// flags are ppl-score's command line; --help prints them.
type flags struct {
	Input           string           `arg:"" optional:"" name:"file" default:"-" help:"ppl-window output to read (.zst: zstd-compressed); - or none for standard input."`
	Model           string           `required:"" placeholder:"M.gguf" help:"The model to score with (GGUF)."`
	Reference       string           `placeholder:"REF.gguf" help:"Also score with this reference model and write KL(REF || model), its log-probs and top-1 agreement per target."`
	KVDtype         string           `name:"kv-dtype" default:"bf16" enum:"f32,f16,bf16,int8,fp8,k8v4,nvfp4,q8_0,q4_0,q4_1,q5_0,q5_1,iq4_nl,rk8v4,rk4v4,rk2v4" help:"KV cache storage: f32, f16, bf16, int8, fp8, k8v4, nvfp4, llama.cpp's q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, or Hadamard-rotated keys rk8v4, rk4v4, rk2v4 (default ${default})."`
	KLDBase         string           `name:"kld-base" placeholder:"BASE" help:"Take the reference from BASE, a file of llama-perplexity --kl-divergence-base (the windows: the llama.cpp protocol at BASE's context over the text it was made from): KL(base || model), the base's log-probs and top-1 agreement per target as llama-perplexity --kl-divergence computes them."`
	WriteKLDBase    string           `name:"write-kld-base" placeholder:"FILE" help:"Also write the model's log-probs as a llama-perplexity --kl-divergence-base file, for ppl-score --kld-base or llama-perplexity --kl-divergence (the llama.cpp protocol over one text, every window; written whole or not at all)."`
	RefKVDtype      string           `name:"reference-kv-dtype" enum:",f32,f16,bf16,int8,fp8,k8v4,nvfp4,q8_0,q4_0,q4_1,q5_0,q5_1,iq4_nl,rk8v4,rk4v4,rk2v4" default:"" help:"KV cache storage of the reference model (default: --kv-dtype)."`
	Threads         int              `default:"0" help:"Worker threads (default: all cores)."`
	Activations     string           `default:"fp32" enum:"fp32,int8,int8-avx2,int8-amx" help:"Arithmetic of products: fp32; int8 (llama.cpp's: 8-bit activations, integer products; on the CPU also ggml-cpu's float operations in its order, as its build for AVX-512 machines computes; on a GPU the integer tensor cores); int8-avx2 (the CPU only: as llama.cpp's build for AVX2 machines computes); int8-amx (the CPU only: as its build for CPUs with AMX-INT8 computes) (default ${default})."`
	SSMStateDtype   string           `name:"ssm-state-dtype" default:"f32" enum:"f32,f16,bf16" help:"Recurrent state of Gated DeltaNet, Kimi Delta Attention and Mamba layers (qwen35, qwen35moe, qwen3next, kimi-linear, mamba, mamba2, jamba, granitehybrid, ...): f32, f16 or bf16 (default ${default})."`
	Device          string           `default:"auto" placeholder:"DEV" help:"Where to score: auto (a CUDA GPU when one is usable, else the CPU), cpu, cuda or cuda:N (default ${default})."`
	Devices         string           `placeholder:"N,N,..." help:"Score on several devices of --device's kind at once, one engine each (GPUs 0,1,2,3); an index may repeat. The output is the same as one device's."`
	RefDevice       string           `name:"reference-device" placeholder:"DEV" help:"Where the reference model runs: a device of the model's kind, cuda:N or cpu (default: the model's device). On another GPU the two models run at once; the numbers are the same."`
	RefDevices      string           `name:"reference-devices" placeholder:"N,N,..." help:"With --devices: the reference's device of each engine, one index per --devices entry (GPUs 4,5,6,7 for --devices 0,1,2,3)."`
	SpreadWeights   bool             `name:"spread-weights" help:"With --devices on GPUs: one copy of the weights spread over the listed GPUs, each engine reading the others' share over NVLink, even when the model fits one GPU (a model that does not is spread without it); GPUs listed twice share their copy anyway."`
	GPUWeights      string           `name:"gpu-weights" default:"quantized" enum:"quantized,bf16" help:"How a GPU keeps the weights: quantized (the file's blocks, dequantized at each product, each weight rounded once to fp16) or bf16 (a bf16 copy made on the host: the earlier path, further from the CPU's numbers, for comparison) (default ${default})."`
	RopeFreqBase    float64          `placeholder:"B" help:"Override the model's RoPE frequency base."`
	RopeScaleFactor float64          `name:"rope-scaling-factor" placeholder:"F" help:"Linear RoPE scaling: positions divided by F."`
	RopeOrigCtx     int              `name:"rope-scaling-original-context" placeholder:"N" help:"Native context for YaRN (default: the model's training context)."`
	RopeYarn        bool             `name:"rope-yarn" help:"YaRN RoPE scaling with factor context/native."`
	RopeYarnFactor  float64          `name:"rope-yarn-factor" placeholder:"F" help:"YaRN RoPE scaling with factor F."`
	CacheDir        string           `placeholder:"DIR" help:"Cache of scored windows (default $$PPL_CACHE_DIR, else the user cache dir)."`
	NoCache         bool             `help:"Neither read nor write the cache."`
	Output          string           `short:"o" placeholder:"FILE" help:"Write to FILE instead of standard output (atomically; .zst compresses)."`
	LogLevel        string           `default:"info" enum:"debug,info,warn,error" help:"Least severe message to show on stderr: debug, info, warn, error."`
	Version         kong.VersionFlag `help:"Print the version and exit."`

	devices    []int // --devices, parsed; nil for one engine on --device
	refDevices []int // --reference-devices, parsed: engine i's reference on refDevices[i]
}

const description = `Score each window with a GGUF model: stage 3 of
ppl-tokenize | ppl-window | ppl-score | ppl-aggregate. Reads ppl-window output
(FILE, or standard input) and writes it through with a scores record after each
window: per target, the log-probability of the actual token (float64 log-softmax
over the vocabulary) and the model's top token; with --reference, also
KL(reference || model), the reference's log-probability and top-1 agreement.

Example: ppl-tokenize --model m.gguf --text a.txt | ppl-window --context 512 \
           | ppl-score --model m.gguf --kv-dtype int8 > scores.ndjson`

// Main runs ppl-score with os.Args and returns its exit status.
func Main() int {
	ctx, in := command.Notify(tool, os.Stderr, "stopping after the current window")
	return in.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is ppl-score without the process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var f flags
	if err := command.Parse(tool, pipe.ToolVersion, description, &f, args, stdout, stderr); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	in, name := stdin, "<stdin>"
	if f.Input != "-" {
		r, err := pipe.Open(f.Input)
		if err != nil {
			return err
		}
		defer r.Close()
		in, name = r, f.Input
	}
	s, err := newScorer(f, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	if f.Output == "" {
		return s.run(ctx, pipe.NewReader(in, name), stdout)
	}
	if err := pipe.CheckNotInput(f.Output, f.Input, f.Model, f.Reference, f.KLDBase); err != nil {
		return err
	}
	af, err := pipe.Create(f.Output)
	if err != nil {
		return err
	}
	defer af.Close() // removes the file unless committed
	if err := s.run(ctx, pipe.NewReader(in, name), af); err != nil {
		return err
	}
	return af.Commit()
}

func (f *flags) validate() error {
	for _, v := range []struct {
		name string
		x    float64
	}{{"--rope-freq-base", f.RopeFreqBase}, {"--rope-scaling-factor", f.RopeScaleFactor}, {"--rope-yarn-factor", f.RopeYarnFactor}} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) || v.x < 0 {
			return command.Usagef("%s %v: want a finite positive number", v.name, v.x)
		}
	}
	switch {
	case f.Threads < 0:
		return command.Usagef("--threads %d: must not be negative", f.Threads)
	case f.RopeScaleFactor < 0 || f.RopeYarnFactor < 0:
		return command.Usagef("RoPE scaling factors must be positive")
	case f.RopeScaleFactor > 0 && (f.RopeYarn || f.RopeYarnFactor > 0):
		return command.Usagef("--rope-scaling-factor (linear) conflicts with YaRN (--rope-yarn, --rope-yarn-factor)")
	case f.RopeYarn && f.RopeYarnFactor > 0:
		return command.Usagef("--rope-yarn and --rope-yarn-factor: give one")
	case f.RopeOrigCtx < 0:
		return command.Usagef("--rope-scaling-original-context %d: must be positive", f.RopeOrigCtx)
	}
	if f.Device != "auto" {
		name, _, err := backend.ParseDevice(f.Device)
		if err != nil {
			return command.Usagef("--device: %v", err)
		}
		if _, ok := backend.Get(name); !ok {
			return command.Usagef("--device %s: no such device (have auto, %s)", f.Device, strings.Join(backend.Names(), ", "))
		}
	}
	if f.Devices != "" {
		if err := f.parseDevices(); err != nil {
			return err
		}
	}
	if f.SpreadWeights {
		distinct := map[int]bool{}
		for _, d := range f.devices {
			distinct[d] = true
		}
		switch {
		case f.Devices == "":
			return command.Usagef("--spread-weights needs --devices: the GPUs to spread the weights over")
		case f.Device == "cpu":
			return command.Usagef("--spread-weights is for GPUs: the CPU's engines read one mapping of the file already")
		case len(distinct) < 2:
			return command.Usagef("--spread-weights: --devices %s lists one device, whose engines share its copy of the weights anyway", f.Devices)
		}
	}
	// The CUDA backend reads the weight storage from its environment, as
	// it reads PPL_CUDA_PRECISION (backend.Open takes model.Options only).
	if err := os.Setenv("PPL_CUDA_WEIGHTS", f.GPUWeights); err != nil {
		return err
	}
	if f.RefKVDtype == "" {
		f.RefKVDtype = f.KVDtype
	}
	if f.RefKVDtype != f.KVDtype && f.Reference == "" {
		return command.Usagef("--reference-kv-dtype needs --reference")
	}
	switch {
	case f.KLDBase != "" && f.Reference != "":
		return command.Usagef("--kld-base and --reference: give one reference")
	case f.WriteKLDBase != "" && (f.Reference != "" || f.KLDBase != ""):
		return command.Usagef("--write-kld-base writes the model's own log-probs: without --reference or --kld-base")
	}
	return f.parseRefDevices()
}

// parseRefDevices checks --reference-device and reads --reference-devices
// into f.refDevices. A reference runs on a device of the model's kind (the
// model's backend scores both models' logits): --reference-device names
// one device, for one engine; with --devices, --reference-devices gives
// each engine's, index i for the engine on --devices' i-th device. With
// --device auto the kind is checked once the model is loaded
// (scorer.openRef).
func (f *flags) parseRefDevices() error {
	switch {
	case f.RefDevice != "" && f.Reference == "":
		return command.Usagef("--reference-device needs --reference")
	case f.RefDevices != "" && f.Reference == "":
		return command.Usagef("--reference-devices needs --reference")
	case f.RefDevice != "" && f.Devices != "":
		return command.Usagef("--reference-device %s names one device; with --devices give --reference-devices, one per engine", f.RefDevice)
	case f.RefDevices != "" && f.Devices == "":
		return command.Usagef("--reference-devices needs --devices (one reference device per engine); for one engine give --reference-device")
	}
	if f.RefDevice != "" {
		name, _, err := backend.ParseDevice(f.RefDevice)
		if err != nil {
			return command.Usagef("--reference-device: %v", err)
		}
		if _, ok := backend.Get(name); !ok {
			return command.Usagef("--reference-device %s: no such device (have %s)", f.RefDevice, strings.Join(backend.Names(), ", "))
		}
		if kind, _, _ := backend.ParseDevice(f.Device); f.Device != "auto" && kind != name {
			return command.Usagef("--reference-device %s with --device %s: the reference must be on a device of the model's kind (%s)", f.RefDevice, f.Device, kind)
		}
	}
	if f.RefDevices != "" {
		var err error
		if f.refDevices, err = deviceIndices("--reference-devices", f.RefDevices); err != nil {
			return err
		}
		if len(f.refDevices) != len(f.devices) {
			return command.Usagef("--reference-devices %s: want %d indices, one per engine of --devices %s", f.RefDevices, len(f.devices), f.Devices)
		}
	}
	return nil
}

// maxEngines bounds --devices: each engine holds a copy of the model's
// working memory (and, on the CPU, of nothing else: the weights are mapped
// once).
const maxEngines = 64

// parseDevices reads --devices ("0,1,2,3") into f.devices. The devices are
// of --device's kind: auto means cuda (several engines are for GPUs), and
// cuda:N, which names one device, conflicts.
func (f *flags) parseDevices() error {
	name, _, err := backend.ParseDevice(f.Device)
	switch {
	case f.Device == "auto":
		name = "cuda"
	case err != nil:
		return command.Usagef("--device: %v", err)
	case strings.Contains(f.Device, ":"):
		return command.Usagef("--device %s names one device; with --devices give --device %s", f.Device, name)
	}
	if _, ok := backend.Get(name); !ok {
		return command.Usagef("--devices: no %s backend in this build", name)
	}
	f.Device = name
	parts := strings.Split(f.Devices, ",")
	if len(parts) > maxEngines {
		return command.Usagef("--devices %s: %d engines, at most %d", f.Devices, len(parts), maxEngines)
	}
	f.devices, err = deviceIndices("--devices", f.Devices)
	return err
}

// deviceIndices reads flag's list of device indices ("0,1,2,3").
func deviceIndices(flag, list string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 1<<16 {
			return nil, command.Usagef("%s %s: %q is not a device index", flag, list, p)
		}
		out = append(out, n)
	}
	return out, nil
}
