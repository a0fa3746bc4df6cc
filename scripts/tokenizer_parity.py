#!/usr/bin/env python3
"""tokenizer_parity.py — ctrain's WordPiece tokenizer against transformers'
BertTokenizer, on a real corpus: the same vocab.txt, the same lines, the
same ids or it fails.

What it does:
  1. builds two vocabularies from the corpus with `ctrain vocab` (uncased,
     and --cased), so every character of the corpus is in them and the
     comparison exercises WordPiece splitting, not only [UNK];
  2. takes every line of every regular file of the corpus that decodes as
     UTF-8 (links and undecodable lines are skipped and counted), plus a set
     of edge cases (accents, combining marks, CJK, punctuation, control and
     odd whitespace characters, words over 100 characters, unknown symbols);
  3. runs `ctrain tokenize --vocab V [--cased] --in LINES` and
     BertTokenizer(vocab, do_lower_case=uncased, strip_accents=None,
     tokenize_chinese_chars=True).tokenize() + convert_tokens_to_ids() on
     each line, and compares the ids line by line.
Cased text differs between transformers versions in one step: the Python
BertTokenizer of transformers 4.x puts the text in NFC first, transformers
5's BertTokenizer (backed by the tokenizers library, like every
BertTokenizerFast) does not. ctrain's --cased is the latter, --cased-nfc the
former; the script takes the one that matches the transformers it runs
with.
Each line that matches is a pass, each that differs a failure (the first
ones are printed with both token lists). It ends with "N passed, N failed"
like the test programs, so tests/run.sh counts it (make test-gpu runs it:
the GPU machine is where transformers is installed).

usage: scripts/tokenizer_parity.py [--ctrain build/ctrain] [--corpus DIR]
                                   [--vocab-size 8000] [--max-lines N]
Text with the literal strings [CLS], [SEP], [MASK], [PAD] or [UNK] is
skipped: transformers keeps those as special tokens inside text, ctrain
tokenizes text as text.
"""
import argparse
import inspect
import os
import subprocess
import sys
import tempfile

EDGE = [
    "Héllo, Wörld! Ça va? naïve café résumé",
    "e\u0301 combining acute, A\u030a ring, n\u0303",
    "中文字符测试，日本語のテキスト、한국어 text mixed中英",
    "punctuation!!! ... --- (parens) [brackets] {braces} \"quotes\" 'single' `back`",
    "tabs\tand\u00a0no-break\u2003em-space\u3000ideographic space",
    "control\u0007bell and zero\u200bwidth and soft\u00adhyphen",
    "x" * 120 + " a word over 100 characters",
    "unknown symbols ☃ ♞ 🙂 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "ΣΊΣΥΦΟΣ final sigma ΟΔΟΣ, ß and ﬁ ligature, İstanbul",
    "numbers 3.14159 1,000,000 2026-11-30 10:30am $5.00 50% #1 @user",
    "   leading and trailing spaces   ",
    "",
    "a\r\nwindows line end",
]
SPECIAL = ("[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]")


def corpus_lines(root, limit):
    lines, skipped = [], 0
    paths = [root] if os.path.isfile(root) else sorted(
        os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    for p in paths:
        if os.path.islink(p) or not os.path.isfile(p) or p.endswith(".dat"):
            continue
        with open(p, "rb") as f:
            for raw in f.read().split(b"\n"):
                try:
                    s = raw.decode("utf-8")
                except UnicodeDecodeError:
                    skipped += 1
                    continue
                if any(t in s for t in SPECIAL):
                    skipped += 1
                    continue
                lines.append(s)
                if limit and len(lines) >= limit:
                    return lines, skipped
    return lines, skipped


def ctrain_ids(ctrain, vocab, case_flag, path):
    """ctrain's ids of each line; case_flag: None (uncased), --cased or --cased-nfc."""
    cmd = [ctrain, "tokenize", "--vocab", vocab, "--in", path] + ([case_flag] if case_flag else [])
    out = subprocess.run(cmd, check=True, capture_output=True).stdout.decode()
    return [[int(x) for x in l.split()] for l in out.split("\n")[:-1]]


def load_vocab(path):
    """vocab.txt as BERT reads it: one token a line, its id the line number."""
    with open(path, encoding="utf-8") as f:
        return {t.rstrip("\n"): i for i, t in enumerate(f.readlines())}


def make_tokenizer(cls, vocab_path, cased):
    """BertTokenizer over vocab_path, whichever transformers this is: 4.x
    takes vocab_file= (the Python tokenizer), 5.x takes vocab= (a dict; the
    class is backed by the tokenizers library). Checked: a tokenizer that
    did not load every entry of the file is refused, not compared."""
    vocab = load_vocab(vocab_path)
    opts = dict(do_lower_case=not cased, strip_accents=None, tokenize_chinese_chars=True)
    params = inspect.signature(cls.__init__).parameters
    tok = cls(vocab=dict(vocab), **opts) if "vocab" in params else cls(vocab_file=vocab_path, **opts)
    got = tok.get_vocab()
    missing = [t for t, i in vocab.items() if got.get(t) != i]
    if missing:
        print(f"  FAIL {cls.__name__} loaded {len(got)} tokens of {len(vocab)} from {vocab_path} "
              f"(first missing: {missing[:5]})")
        return None
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctrain", default=os.environ.get("CTRAIN_BIN", "build/ctrain"))
    ap.add_argument("--corpus", default="/usr/share/games/fortunes")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--max-lines", type=int, default=0, help="0: every line")
    a = ap.parse_args()
    try:
        from transformers import BertTokenizer
    except ImportError as e:
        print(f"tokenizer_parity: transformers is needed ({e}); pip install transformers")
        print("0 passed, 1 failed")
        return 1
    if not os.path.exists(a.corpus):
        print(f"tokenizer_parity: no corpus at {a.corpus} (apt-get install fortunes, or --corpus)")
        print("0 passed, 1 failed")
        return 1
    lines, skipped = corpus_lines(a.corpus, a.max_lines)
    # one input line per line: the corpus lines have no "\n"; an edge case
    # with "\r\n" becomes two lines, as it would in a file
    lines += [l for e in EDGE for l in e.split("\n")]
    import transformers
    print(f"  transformers {transformers.__version__}, {BertTokenizer.__module__}.{BertTokenizer.__name__}")
    major = int(transformers.__version__.split(".")[0])
    cased_flag = "--cased-nfc" if major < 5 else "--cased"
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "lines.txt")
        with open(text, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(lines) + "\n")
        for cased in (False, True):
            name = "cased" if cased else "uncased"
            vocab = os.path.join(tmp, f"vocab-{name}.txt")
            subprocess.run([a.ctrain, "vocab", "--corpus", a.corpus, "--size", str(a.vocab_size),
                            "--out", vocab] + ([cased_flag] if cased else []),
                           check=True, capture_output=True)
            ours = ctrain_ids(a.ctrain, vocab, cased_flag if cased else None, text)
            tok = make_tokenizer(BertTokenizer, vocab, cased)
            if tok is None:
                failed += 1
                continue
            if len(ours) != len(lines):
                print(f"  FAIL {name}: ctrain printed {len(ours)} lines for {len(lines)}")
                failed += 1
                continue
            bad = 0
            for i, line in enumerate(lines):
                ref = tok.convert_tokens_to_ids(tok.tokenize(line))
                if ref == ours[i]:
                    passed += 1
                    continue
                failed += 1
                bad += 1
                if bad <= 10:
                    print(f"  FAIL {name} line {i + 1}: {line[:80]!r}")
                    print(f"    ctrain:       {tok.convert_ids_to_tokens(ours[i])[:30]}")
                    print(f"    transformers: {tok.convert_ids_to_tokens(ref)[:30]}")
            print(f"  {name}: {len(lines) - bad} of {len(lines)} lines identical "
                  f"({len(tok.get_vocab())} tokens in the vocab)")
    print(f"  corpus lines skipped: {skipped} (not UTF-8, or holding a special-token string)")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
