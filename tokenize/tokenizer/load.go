package tokenizer

import (
	"fmt"

	"ppl.dev/gguf"
)

// Metadata keys read by Load.
const (
	KeyModel          = "tokenizer.ggml.model"
	KeyPre            = "tokenizer.ggml.pre"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyScores         = "tokenizer.ggml.scores"
	KeyTypes          = "tokenizer.ggml.token_type"
	KeyMerges         = "tokenizer.ggml.merges"
	KeyBOS            = "tokenizer.ggml.bos_token_id"
	KeyEOS            = "tokenizer.ggml.eos_token_id"
	KeyUNK            = "tokenizer.ggml.unknown_token_id"
	KeyEOT            = "tokenizer.ggml.eot_token_id"
	KeyEOM            = "tokenizer.ggml.eom_token_id"
	KeyFIMPre         = "tokenizer.ggml.fim_pre_token_id"
	KeyFIMSuf         = "tokenizer.ggml.fim_suf_token_id"
	KeyFIMMid         = "tokenizer.ggml.fim_mid_token_id"
	KeyFIMPad         = "tokenizer.ggml.fim_pad_token_id"
	KeyFIMRep         = "tokenizer.ggml.fim_rep_token_id"
	KeyFIMSep         = "tokenizer.ggml.fim_sep_token_id"
	KeyAddBOS         = "tokenizer.ggml.add_bos_token"
	KeyAddEOS         = "tokenizer.ggml.add_eos_token"
	KeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// Load builds the tokenizer of a GGUF file from its tokenizer.ggml.* keys.
// It reads the arrays without copying them: the tokenizer keeps the file's
// copy of the token texts (which outlives Close), and converts the scores
// and types once.
func Load(f *gguf.File) (Tokenizer, error) {
	cfg, err := readConfig(f, true)
	if err != nil {
		return nil, err
	}
	t, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return t, nil
}

// ReadConfig reads the tokenizer definition of a GGUF file. The slices are
// the caller's to change.
func ReadConfig(f *gguf.File) (Config, error) { return readConfig(f, false) }

// readConfig is ReadConfig; shared leaves Tokens and Merges nil, with the
// file's arrays in their place, and takes Scores and Types from the file
// without a copy when they have that type (New only reads them).
func readConfig(f *gguf.File, shared bool) (Config, error) {
	var c Config
	var err error
	has := func(k string) bool { _, ok := f.Lookup(k); return ok }
	wrap := func(e error) error { return fmt.Errorf("tokenizer: %w", e) }
	if c.Model, err = f.String(KeyModel); err != nil {
		return c, wrap(err)
	}
	if has(KeyPre) {
		if c.Pre, err = f.String(KeyPre); err != nil {
			return c, wrap(err)
		}
	}
	strings := func(key string, dst *[]string, arr **gguf.StringArray) error {
		if shared {
			*arr, err = f.StringArray(key)
		} else {
			*dst, err = f.Strings(key)
		}
		return err
	}
	if err := strings(KeyTokens, &c.Tokens, &c.tokenArray); err != nil {
		return c, wrap(err)
	}
	if has(KeyScores) {
		v, _ := f.Lookup(KeyScores)
		if s, ok := v.Any().([]float32); ok && shared {
			c.Scores, c.ownScores = s, true
		} else if c.Scores, err = f.Float32s(KeyScores); err != nil {
			return c, wrap(err)
		}
	}
	if has(KeyTypes) {
		v, _ := f.Lookup(KeyTypes)
		if s, ok := v.Any().([]int32); ok && shared {
			c.Types = s
		} else if c.Types, err = f.Int32s(KeyTypes); err != nil {
			return c, wrap(err)
		}
	}
	if has(KeyMerges) {
		if err := strings(KeyMerges, &c.Merges, &c.mergeArray); err != nil {
			return c, wrap(err)
		}
	}
	for _, x := range []struct {
		key string
		dst **uint32
	}{
		{KeyBOS, &c.BOS}, {KeyEOS, &c.EOS}, {KeyUNK, &c.UNK}, {KeyEOT, &c.EOT}, {KeyEOM, &c.EOM},
		{KeyFIMPre, &c.FIMPre}, {KeyFIMSuf, &c.FIMSuf}, {KeyFIMMid, &c.FIMMid},
		{KeyFIMPad, &c.FIMPad}, {KeyFIMRep, &c.FIMRep}, {KeyFIMSep, &c.FIMSep},
	} {
		if !has(x.key) {
			continue
		}
		v, err := f.Uint(x.key)
		if err != nil {
			return c, wrap(err)
		}
		if v > 1<<32-1 {
			return c, fmt.Errorf("tokenizer: %s: %s = %d out of range", f.Path, x.key, v)
		}
		u := uint32(v)
		*x.dst = &u
	}
	for _, x := range []struct {
		key string
		dst **bool
	}{{KeyAddBOS, &c.AddBOS}, {KeyAddEOS, &c.AddEOS}, {KeyAddSpacePrefix, &c.AddSpacePrefix}} {
		if !has(x.key) {
			continue
		}
		v, err := f.Bool(x.key)
		if err != nil {
			return c, wrap(err)
		}
		*x.dst = &v
	}
	return c, nil
}
