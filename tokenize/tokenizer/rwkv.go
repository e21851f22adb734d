package tokenizer

import "ppl.dev/tokenize/internal/vocab"

// rwkvModel is llama.cpp's RWKV "World" tokenizer (llm_tokenizer_rwkv): the
// token texts are escaped byte strings (\t \n \r \xNN, a backslash before
// any other byte stands for that byte), and a text is cut greedily into the
// longest token that matches at each byte, through a byte trie. A byte that
// starts no token is the unknown token. (Where a byte starts tokens but
// ends none, llama.cpp never finishes; that needs a vocabulary without the
// single bytes, which World vocabularies have, and is the unknown token
// here.)
type rwkvModel struct {
	nodes []rwkvNode
	unk   int32
}

type rwkvNode struct {
	next map[byte]int32
	id   int32 // -1: no token ends here
}

func newRWKV(v *vocab.Vocab, unk int32) *rwkvModel {
	m := &rwkvModel{nodes: []rwkvNode{{id: -1}}, unk: unk}
	for id := range v.Len() {
		cur := int32(0)
		for _, c := range rwkvUnescape(v.Token(int32(id))) {
			nx, ok := m.nodes[cur].next[c]
			if !ok {
				if m.nodes[cur].next == nil {
					m.nodes[cur].next = map[byte]int32{}
				}
				nx = int32(len(m.nodes))
				m.nodes[cur].next[c] = nx
				m.nodes = append(m.nodes, rwkvNode{id: -1})
			}
			cur = nx
		}
		if cur != 0 {
			m.nodes[cur].id = int32(id) // a later duplicate wins, as in llama.cpp's trie
		}
	}
	return m
}

// rwkvUnescape is llama_unescape_rwkv_token.
func rwkvUnescape(s string) []byte {
	out := make([]byte, 0, len(s))
	escaping, hexLeft, acc := false, 0, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case hexLeft > 0:
			v := c - '0'
			if c >= 'a' {
				v = c - 'a' + 10
			}
			acc = acc<<4 + v
			if hexLeft--; hexLeft == 0 {
				out = append(out, acc)
				acc = 0
			}
		case escaping:
			switch c {
			case 't':
				out = append(out, '\t')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 'x':
				hexLeft = 2
			default:
				out = append(out, c)
			}
			escaping = false
		case c == '\\':
			escaping = true
		default:
			out = append(out, c)
		}
	}
	return out
}

func (m *rwkvModel) encode(dst []int32, text []byte) []int32 {
	for pos := 0; pos < len(text); {
		cur, ok := m.nodes[0].next[text[pos]]
		if !ok {
			dst = append(dst, m.unk)
			pos++
			continue
		}
		id, end := int32(-1), 0
		for p := pos; ; {
			if n := m.nodes[cur].id; n >= 0 {
				id, end = n, p+1
			}
			if p+1 >= len(text) {
				break
			}
			p++
			if cur, ok = m.nodes[cur].next[text[p]]; !ok {
				break
			}
		}
		if id < 0 {
			dst = append(dst, m.unk)
			pos++
			continue
		}
		dst = append(dst, id)
		pos = end
	}
	return dst
}
