# The own texts of the @plamo3 and @hybriddna runs of
# llamacpp-xcheck-tokenizers.json.gz (see ../xcheck.md):
#   python3 extra_texts.py > extra.json
import json, random, sys
plamo3 = [
    "<|plamo:bos|>Hello<|plamo:eos|>",
    "<|plamo:fim_prefix|>def f():<|plamo:fim_suffix|>  return 1<|plamo:fim_middle|>",
    "<|plamo:file_separator|>main.go<|plamo:test|>x<|plamo:test|>",
    "<|plamo:|>a<|plamo:|><|plamo:",
    "<|plamo:a b|>c<|plamo:a\tb|>",
    "<|plamo:a\x1cb|>c<|plamo:a\x1fb|> <|plamo:a\u3000b|> <|plamo:a\u00a0b|>",
    "<|plamo:" + "x" * 64 + "|>y<|plamo:" + "x" * 65 + "|>z",
    "<|plamo:x|<|plamo:x|y><|plamo:x||>",
    "x|><|plamo:y|>x|><|plamo:",
    "<|plamo:<|plamo:x|>|>",
    "<|plamo:aaaa|>b<|plamo:    |>",
    "aaaa aaa aaaaab aaab aaaaaaaaa b",
    "xxxxxxxxxx ==== === ===== ----\n----",
    "a  b a   b a    b a b  x   x",
    "    indented\n        more\n\tend",
    "\n\n\n\n\n\n\nx\r\n\r\n\r\n\r\n",
    "\ufeffHello \ufeff\ufeff",
    "a\uee00b aa\uee00aa \uee00\uee00x\uee00",
    "ééééé ééé éé 日日日日 日日日 😀😀😀😀",
    "<|plamo:x|>aaaa<|plamo:y|>    <|plamo:z|>",
    "aaaa<|plamo:x|>aaaa",
    "||||<<<<|plamo:x|>>>>>",
    "<|plamo:test|>aaaa<|plamo:test|>",
    "..... !!!! ???? 1111 2222222 ,,,, ____ ~~~~",
    "<|plamo:a\x1cb|><a<|plamo:a\x1fb|><a<|plamo:a b|><a<|plamo:a\u3000b|><a<|plamo:a\x1bb|><a",
    "<|plamo:" + "xy" * 32 + "|><a<|plamo:" + "xy" * 32 + "z|><a",
    "\n\n\n\nx \n\n\nx \n\n\n\n\nx",
]
dna = [
    "<dna>ACGTACGTACGT</dna>",
    "<dna>acgtacGGATCCtgca</dna>",
    "<dna>ACGTA</dna> <dna>ACGTACG</dna> <dna>A</dna> <dna></dna>",
    "Hello <dna>ACGTNNACGTRY</dna> world",
    "<dna>ACGTACGTAC",
    "</dna>ACGT<dna></dna>ACGT",
    "<dna>AC GT\nACGTAC\tACGTAC</dna>",
    "<dna>ACGTéACGT日本ACGTAC</dna>",
    "x<dna>AAAAAT</dna>y<dna>TTTTTT</dna>z TTTTTT tttttt",
    "<dna><dna>ACGTAC</dna></dna>",
    "ACGTAC\ue000 <dna>ACGTAC\ue000</dna>",
    "The gene<dna>ATGGCC</dna>is<dna>atgGCCtaa</dna>.",
    "<DNA>ACGTAC</DNA> <dna >ACGTAC</dna>",
    "<dna>AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA</dna>",
    "<|begin_of_text|><dna>ACGT</dna><|end_of_text|>",
]
rng = random.Random(20261202)
for _ in range(12):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.5:
            n = rng.randint(0, 40)
            seq = "".join(rng.choice("ACGTACGTacgtN") for _ in range(n))
            parts.append("<dna>" + seq + ("</dna>" if rng.random() < 0.85 else ""))
        else:
            parts.append(rng.choice(["Hello", " world", ", ", "ACGT", "TTTTTT", "é", "\n", "12345", "x"]))
    dna.append("".join(parts))
pieces = ["<|plamo:x|>", "<|plamo:", "|>", "aaaa", "a", " ", "  ", "\n", "\uee00", "\ufeff", "é", "x", "b", "=", "日"]
for _ in range(12):
    plamo3.append("".join(rng.choice(pieces) for _ in range(rng.randint(3, 25))))
for t in plamo3 + dna:
    assert t, repr(t)
json.dump({"plamo3": plamo3, "hybriddna": dna}, sys.stdout, ensure_ascii=False)
print(len(plamo3), len(dna), file=sys.stderr)
