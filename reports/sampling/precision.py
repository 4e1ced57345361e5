"""What diff's word sample costs in precision: every degree of `recrawl-diff score` under
the stage's caps against the same pair with --all-words, for pages of 10,000 to 100,000
words (drawn from a vocabulary of 20,000) with 1 % to 50 % of their words replaced, three
pairs each. Prints a Markdown table of the absolute errors.

    cargo build --release --bin recrawl-diff
    python3 reports/sampling/precision.py target/release/recrawl-diff
"""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

METRICS = ["ied", "cos", "wd", "ed", "sh"]


def score(binary, old, new, *flags):
    return json.loads(subprocess.check_output([binary, "score", old, new, "--words", *flags]))


def main(binary):
    rng = random.Random(7)
    vocabulary = [f"v{i}" for i in range(20_000)]
    errors = {}
    with tempfile.TemporaryDirectory() as directory:
        old_path, new_path = os.path.join(directory, "old"), os.path.join(directory, "new")
        for words in [10_000, 30_000, 100_000]:
            for share in [0.01, 0.05, 0.2, 0.5]:
                for _ in range(3):
                    old = [rng.choice(vocabulary) for _ in range(words)]
                    new = list(old)
                    for i in rng.sample(range(words), int(words * share)):
                        new[i] = f"x{rng.randrange(10**9)}"
                    with open(old_path, "w") as f:
                        f.write(" ".join(old))
                    with open(new_path, "w") as f:
                        f.write(" ".join(new))
                    capped = score(binary, old_path, new_path)
                    whole = score(binary, old_path, new_path, "--all-words")
                    for metric in METRICS:
                        errors.setdefault((words, metric), []).append(capped[metric] - whole[metric])
                    errors.setdefault((words, "compared"), []).append(capped["compared_old"])
    print("| words | compared | " + " | ".join(f"{m} mean (max) error" for m in METRICS) + " |")
    print("|---" * (len(METRICS) + 2) + "|")
    for words in [10_000, 30_000, 100_000]:
        cells = []
        for metric in METRICS:
            values = errors[(words, metric)]
            cells.append(f"{statistics.mean(values):+.3f} ({max(values, key=abs):+.3f})")
        compared = round(statistics.mean(errors[(words, "compared")]))
        print(f"| {words:,} | {compared:,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/release/recrawl-diff")
