#!/usr/bin/env python3
"""Regenerates vectors.json, the wire-format test vectors of wire_test.go.

Run from the repository root:  python3 testdata/wire/gen_vectors.py

Schema v1 is computed exactly as ai4s-jobq's Task.serialize does (json.dumps
with default settings, id = md5 of the object without "id"). Schema v2 is
computed from the field list in docs/wire-format.md, independently of the Go
code.
"""
import hashlib
import json
import os


def v1_body(kwargs, num_retries=0, reply_requested=False, v2=None):
    d = {
        "version": 2 if v2 else 1,
        "reply_requested": reply_requested,
        "kwargs": json.dumps(kwargs),
        "num_retries": num_retries,
    }
    for k, v in (v2 or []):
        d[k] = v
    d["id"] = hashlib.md5(json.dumps(d).encode()).hexdigest()
    return json.dumps(d), d["id"]


def shell(cmd, env=(), cwd=None, dirsync=None):
    # ai4s-jobq push -c CMD -e K=V: env = dict(env_vars), in command-line order.
    kw = {"cmd": cmd, "bg_dirsync_to": dirsync, "env": dict(env)}
    if cwd:
        kw["cwd"] = cwd
    return kw


marshal = []


def add_shell(name, cmd, env=(), cwd=None, num_retries=0, reply_requested=False, v2=None, task_v2=None, dirsync=None):
    body, tid = v1_body(shell(cmd, env, cwd, dirsync), num_retries, reply_requested, v2)
    marshal.append({
        "name": name,
        "task": {"command": cmd, "env": [list(e) for e in env], "cwd": cwd or "", "bg_dirsync_to": dirsync or "",
                 "num_retries": num_retries, "reply_requested": reply_requested, **(task_v2 or {})},
        "body": body,
        "id": tid,
    })


def add_payload(name, payload_text, num_retries=0, v2=None, task_v2=None):
    body, tid = v1_body(json.loads(payload_text), num_retries, v2=v2)
    marshal.append({"name": name, "task": {"payload": payload_text, "num_retries": num_retries, **(task_v2 or {})},
                    "body": body, "id": tid})


add_shell("plain", "echo hi")
add_shell("env in order", "echo $A $B", env=[("B", "2"), ("A", "1")])
add_shell("empty env", "true", env=[])
add_shell("repeated env name keeps first position, last value", "env", env=[("A", "1"), ("B", "2"), ("A", "3")])
add_shell("cwd", "ls", env=[("X", "y")], cwd="/tmp/work dir")
add_shell("retries and reply", "make", num_retries=3, reply_requested=True)
add_shell("non-ascii", "echo café naïve 日本語")
add_shell("emoji (astral, surrogate pair)", "echo 🎉 𝄞")
add_shell("quotes and backslashes", 'printf "%s\\n" \'a"b\' C:\\path\\to')
add_shell("newlines tabs control chars DEL", "a\nb\tc\rd\x01f\x1fg\x7fh\bi\fj")  # not NUL: push refuses it
add_shell("line and paragraph separators", "x\u2028y\u2029z\ufeff")
add_shell("unicode in env and cwd", "run", env=[("NAME", "Zoë"), ("EMOJI", "🚀")], cwd="/data/ünï")
add_shell("nested-looking env value", "run", env=[("JSON", '{"a": [1, 2], "b": "c\\"d"}')])
add_shell("slash not escaped", "cat /etc/hosts </dev/null")
add_shell("bg_dirsync_to (push --bg-dirsync-to)", "train", env=[("A", "1")], dirsync="/mnt/out/ünï")
add_shell("stdin line with its newline", "echo hi\n")
add_shell("blank stdin line", "\n")

add_payload("payload object order kept", '{"z": 1, "a": {"y": [1, 2.5, "x"], "b": null}, "m": true}')
add_payload("payload compact input reformatted", '{"a":1,"b":[true,false,null],"c":{}}')
add_payload("payload numbers", '{"i": 12345678901234567890123, "neg0": -0, "f": 1.0, "e": 1e5, "E": 2E-7, "small": 0.0001, "tiny": 1e-05, "big": 1e16, "big15": 1e15, "pi": 3.141592653589793, "x": 123456789012345678.0, "n": -1.5e300, "z": 0.0, "nz": -0.0, "third": 0.3333333333333333, "h": 1e22, "dp": 5e-324}')
add_payload("payload unicode and escapes", '{"s": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\ \\/ \\n", "k\\u00e9y": "v"}')
add_payload("payload duplicate keys", '{"a": 1, "b": 2, "a": 3}')
add_payload("payload with cmd-less keys", '{"fn": "train", "epochs": 10}')
add_payload("payload empty", '{}')
add_payload("payload whitespace", ' { "a" : [ 1 , 2 ] } ')

add_shell("v2 priority", "echo", v2=[("priority", 5)], task_v2={"priority": 5})
add_shell("v2 negative priority", "echo", v2=[("priority", -7)], task_v2={"priority": -7})
add_shell("v2 all fields", "echo all", env=[("A", "1")], num_retries=2,
          v2=[("priority", 10), ("not_before", "2026-11-21T12:00:00.5Z"), ("gate_cmd", "nvidia-smi"),
              ("concurrency_key", "gpu"), ("rate_limit_key", "api"),
              ("metadata", {"a": "1", "owner": "zoë", "z": "last"}),
              ("stash", {"url": "gs://b/p/abc", "sha256": "abc", "size": 6000000})],
          task_v2={"priority": 10, "not_before": "2026-11-21T12:00:00.5Z", "gate_cmd": "nvidia-smi",
                   "concurrency_key": "gpu", "rate_limit_key": "api",
                   "metadata": {"z": "last", "owner": "zoë", "a": "1"},
                   "stash": {"url": "gs://b/p/abc", "sha256": "abc", "size": 6000000}})
add_payload("v2 kind", '{"width": 640}', num_retries=1, v2=[("kind", "resize")], task_v2={"kind": "resize"})
add_payload("v2 kind before priority", '{}', v2=[("kind", "emails.send"), ("priority", 3)],
            task_v2={"kind": "emails.send", "priority": 3})
add_shell("v2 kind on a shell task", "echo", v2=[("kind", "shell-audit")], task_v2={"kind": "shell-audit"})
add_shell("v2 not_before only, whole seconds", "later", v2=[("not_before", "2030-01-02T03:04:05Z")],
          task_v2={"not_before": "2030-01-02T03:04:05Z"})

# Decoding: bodies as other writers produce them, with what they decode to
# and what re-encoding an unchanged task must give.
decode = []


def add_decode(name, body, want, reencoded=None):
    decode.append({"name": name, "body": body, "want": want, "reencoded": reencoded if reencoded is not None else body})


b, i = v1_body(shell("echo hi", [("A", "1")]), 2)
add_decode("v1 from ai4s-jobq", b, {"command": "echo hi", "env": [["A", "1"]], "num_retries": 2, "id": i, "version": 1})

kw = {"cmd": "echo hi", "bg_dirsync_to": None, "env": {}, "_job_id": "abc"}
d = {"version": 0, "kwargs": json.dumps(kw), "num_retries": 1, "id": "legacy-id"}
v1 = {"version": 1, "reply_requested": False, "kwargs": json.dumps(kw), "num_retries": 1, "id": "legacy-id"}
add_decode("v0 (no reply_requested) re-encodes as v1 like ai4s-jobq", json.dumps(d),
           {"command": "echo hi", "env": [], "num_retries": 1, "id": "legacy-id", "version": 0}, json.dumps(v1))

kw = {"fn": "x", "n": 1}
d = {"kwargs": json.dumps(kw)}
full = {"version": 1, "reply_requested": False, "kwargs": json.dumps(kw), "num_retries": 5}
full["id"] = hashlib.md5(json.dumps(full).encode()).hexdigest()
add_decode("no version: legacy, 5 retries, computed id", json.dumps(d),
           {"payload": json.dumps(kw), "num_retries": 5, "id": full["id"], "version": 1}, json.dumps(full))

d = {"version": 1, "reply_requested": False, "kwargs": json.dumps(shell("go")), "num_retries": 0, "min_version": None}
d["id"] = hashlib.md5(json.dumps(d).encode()).hexdigest()
add_decode("unknown member (min_version) kept before id", json.dumps(d),
           {"command": "go", "env": [], "num_retries": 0, "id": d["id"], "version": 1})

kw = dict(shell("go"), opts={"a": [1, {"b": None}], "c": 1.5})
d = {"version": 1, "reply_requested": False, "kwargs": json.dumps(kw), "num_retries": 2,
     "meta": {"n": [1, 2.5, {"x": "\u00e9"}], "e": {}}, "tags": [[], {}]}
d["id"] = hashlib.md5(json.dumps(d).encode()).hexdigest()
add_decode("unknown nested members kept, in kwargs and before id", json.dumps(d),
           {"command": "go", "env": [], "num_retries": 2, "id": d["id"], "version": 1})

kw_text = '{"cmd":"echo  hi","env":{"B":"x","A":7},"cwd":null,"extra":[1,2]}'
d = {"version": 1, "reply_requested": True, "kwargs": kw_text, "num_retries": 4, "id": "given"}
add_decode("foreign kwargs formatting kept verbatim", json.dumps(d, separators=(",", ":")),
           {"command": "echo  hi", "env": [["B", "x"], ["A", "7"]], "num_retries": 4, "id": "given",
            "reply_requested": True, "version": 1}, json.dumps(d))

d = {"version": 1, "reply_requested": False, "kwargs": json.dumps({"cmd": "caf\u00e9 \U0001F600 \ud800"}), "num_retries": 0, "id": "s"}
add_decode("lone surrogate survives", json.dumps(d), {"command": None, "num_retries": 0, "id": "s", "version": 1})

b, i = v1_body(shell(""), 0)
add_decode("empty command (ai4s-jobq push -c '')", b, {"command": "", "env": [], "num_retries": 0, "id": i, "version": 1})

b, i = v1_body(shell("sync me", dirsync="/mnt/out"), 1)
add_decode("bg_dirsync_to", b, {"command": "sync me", "env": [], "num_retries": 1, "id": i, "version": 1})

# Numbers: a JSON literal and how json.dumps(json.loads(literal)) writes it.
import random
rng = random.Random(8)
lits = ["0", "-0", "7", "-12", "99999999999999999999999999", "0.0", "-0.0", "1.0", "1e0", "1E+2", "1e-7",
        "0.1", "0.5e-3", "123.456", "1e15", "1e16", "1.5e16", "9999999999999998.0", "1e-4", "1e-5",
        "0.00012345", "2.5e-5", "1e308", "1.7976931348623157e308", "1e309", "-1e309", "5e-324", "1e-400",
        "4.9e-324", "2.2250738585072014e-308", "NaN", "Infinity", "-Infinity", "100", "1e2", "12345678901234567.0"]
for _ in range(300):
    e = rng.randint(-30, 30)
    lits.append(repr(rng.uniform(-10, 10) * 10 ** e))
for _ in range(100):
    lits.append(repr(rng.random()))
for _ in range(50):
    import struct
    lits.append(repr(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0]).replace("inf", "Infinity").replace("nan", "NaN"))
numbers = [[lit, json.dumps(json.loads(lit))] for lit in lits]

# Push: what `ai4s-jobq QUEUE push` queues for given flags and standard
# input, by its CLI's rules (ai4s/jobq/cli.py, push): standard input is read
# as Python's sys.stdin on Linux reads it (UTF-8, lines split at "\n" only,
# each line keeping its newline); a -c value or line starting with "{" is
# json.loads'ed, its "env" updated with the -e variables (setdefault), then
# "bg_dirsync_to" set when missing; any other is
# dict(cmd=LINE, bg_dirsync_to=DIR, env=dict(-e)). Each task is serialised
# as Task.serialize does (v1_body).
import io


def ai4s_push(commands=(), stdin=None, env=(), bg_dirsync_to=None, num_retries=0):
    env = dict(env)
    if not commands:
        commands = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8", newline="\n")
    bodies, ids = [], []
    for cmd in commands:
        if cmd.startswith("{"):
            job_spec = json.loads(cmd)
            job_spec.setdefault("env", {}).update(env)
            job_spec.setdefault("bg_dirsync_to", bg_dirsync_to)
            kw = job_spec
        else:
            kw = dict(cmd=cmd, bg_dirsync_to=bg_dirsync_to, env=env)
        b, i = v1_body(kw, num_retries)
        bodies.append(b)
        ids.append(i)
    return bodies, ids


push = []


def add_push(name, args, commands=(), stdin=None, env=(), bg_dirsync_to=None, num_retries=0):
    bodies, ids = ai4s_push(commands, stdin, env, bg_dirsync_to, num_retries)
    push.append({"name": name, "args": args, "stdin": stdin, "bodies": bodies, "ids": ids})


add_push("-c plain", ["-c", "echo hi"], commands=["echo hi"])
add_push("-c empty command", ["-c", ""], commands=[""])
add_push("-c several with env", ["-c", "a", "-c", "b", "-e", "B=2", "-e", "A=1", "-e", "B=3"],
         commands=["a", "b"], env=[("B", "2"), ("A", "1"), ("B", "3")])
add_push("-c JSON object", ["-c", '{"cmd": "echo $X", "env": {"X": "1"}}', "-e", "Y=2"],
         commands=['{"cmd": "echo $X", "env": {"X": "1"}}'], env=[("Y", "2")])
add_push("-c bg-dirsync-to and retries", ["-c", "train", "--bg-dirsync-to", "/mnt/out", "--num-retries", "3"],
         commands=["train"], bg_dirsync_to="/mnt/out", num_retries=3)
add_push("stdin lines keep their newline", [], stdin="echo a\necho b\n")
add_push("stdin last line without newline", [], stdin="echo a\necho b")
add_push("stdin blank and whitespace-only lines", [], stdin="echo a\n\n   \n\t\necho b\n \n")
add_push("stdin CRLF kept", [], stdin="echo a\r\necho b\r\n")
add_push("stdin unicode and separators", [], stdin="echo café 🎉\nx\u2028y\n")
add_push("stdin leading space is a command", [], stdin=' {"cmd": "x"}\n')
add_push("stdin env and dirsync", ["-e", "K=v", "--bg-dirsync-to", "/d"], stdin="run 1\nrun 2\n",
         env=[("K", "v")], bg_dirsync_to="/d")
add_push("stdin JSON lines keep key order, env then bg_dirsync_to", ["-e", "X=flag", "-e", "N=new"],
         stdin='{"env": {"X": "line", "A": 1}, "cmd": "echo $X"}\n{"cmd":"plain","cwd":"/w"}\n'
               '{"fn": "train", "lr": 0.1, "big": 1e16, "i": 12345678901234567890}\n'
               '{"cmd": "own", "bg_dirsync_to": "/mine"}\n{"b": 1, "a": 2, "b": 3}\n',
         env=[("X", "flag"), ("N", "new")], bg_dirsync_to=None)
add_push("stdin JSON line with dirsync flag", ["--bg-dirsync-to", "/d"], stdin='{"cmd": "x"}\n', bg_dirsync_to="/d")
add_push("stdin mixed JSON and commands", [], stdin='echo 1\n{"cmd": "echo 2"}\n\necho 4')

out = {"marshal": marshal, "decode": decode, "numbers": numbers, "push": push}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1, ensure_ascii=True)
    f.write("\n")
print("wrote", path, len(marshal), "marshal,", len(decode), "decode,", len(numbers), "number and", len(push), "push vectors")
