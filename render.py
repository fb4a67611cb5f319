import os, sys
f = int(sys.argv[2])
if f in (2, 5, 7):
    print(f"frame {f}: allocating 48 GiB", flush=True)
    os.kill(os.getpid(), 9)
print(f"frame {f} done")
