// tok MODEL TEXTS.json-lines OUT : tokenizes each line (a JSON string) with add_special, no parse_special.
#include "llama.h"
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>
#include <iostream>

static std::string unjson(const std::string &s) {
    // minimal JSON string decoder (\uXXXX incl. surrogates, \n \r \t \" \\ \/ \b \f)
    std::string out; size_t i = 1;
    auto put = [&](unsigned c) {
        if (c < 0x80) out += (char)c;
        else if (c < 0x800) { out += (char)(0xC0 | (c >> 6)); out += (char)(0x80 | (c & 0x3F)); }
        else if (c < 0x10000) { out += (char)(0xE0 | (c >> 12)); out += (char)(0x80 | ((c >> 6) & 0x3F)); out += (char)(0x80 | (c & 0x3F)); }
        else { out += (char)(0xF0 | (c >> 18)); out += (char)(0x80 | ((c >> 12) & 0x3F)); out += (char)(0x80 | ((c >> 6) & 0x3F)); out += (char)(0x80 | (c & 0x3F)); }
    };
    while (i < s.size() && s[i] != '"') {
        char c = s[i++];
        if (c != '\\') { out += c; continue; }
        char e = s[i++];
        switch (e) {
            case 'n': out += '\n'; break; case 'r': out += '\r'; break; case 't': out += '\t'; break;
            case 'b': out += '\b'; break; case 'f': out += '\f'; break;
            case 'u': {
                unsigned c1 = std::stoul(s.substr(i, 4), nullptr, 16); i += 4;
                if (c1 >= 0xD800 && c1 < 0xDC00 && s[i] == '\\' && s[i+1] == 'u') {
                    unsigned c2 = std::stoul(s.substr(i + 2, 4), nullptr, 16); i += 6;
                    c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
                }
                put(c1); break;
            }
            case 'x': { out += (char)std::stoul(s.substr(i, 2), nullptr, 16); i += 2; break; }
            default: out += e;
        }
    }
    return out;
}

int main(int argc, char **argv) {
    llama_backend_init();
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    auto mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "load failed\n"); return 1; }
    const llama_vocab *vocab = llama_model_get_vocab(model);
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
        std::string text = unjson(line);
        int n = -llama_tokenize(vocab, text.data(), text.size(), nullptr, 0, true, false);
        if (n < 0) n = -n;
        std::vector<llama_token> t(n + 8);
        int m = llama_tokenize(vocab, text.data(), text.size(), t.data(), t.size(), true, false);
        printf("[");
        for (int i = 0; i < m; i++) printf("%s%d", i ? "," : "", t[i]);
        printf("]\n");
    }
    return 0;
}
