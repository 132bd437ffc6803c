"""model_file_cases — what the model-file case generators share
(make_gguf_cases.py, make_safetensors_cases.py; the manifest grammar is in
make_gguf_cases.py): writing files, a tensor's files and manifest line, the
bad files, the fuzz seeds cut from a valid file, and the manifest."""
import os

import numpy as np


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def tensor_line(out, stem, name, type_name, rlx_dtype, dims, offset, raw, f32):
    """Writes a tensor's bytes as STEM.bin (and its values as float32 to
    STEM.f32 when f32 is not None) into out; returns its "tensor" line."""
    write_bytes(os.path.join(out, stem + ".bin"), raw)
    f32file = "-"
    if f32 is not None:
        f32file = stem + ".f32"
        write_bytes(os.path.join(out, f32file), np.ascontiguousarray(f32, np.float32).tobytes())
    return "tensor %s %s %s %d %s %d %d %s %s" % (
        name.encode().hex() or "-", type_name, rlx_dtype or "-", len(dims), ",".join(map(str, dims)) or "-",
        offset, len(raw), stem + ".bin", f32file)


def write_bad_files(d, bad, ext, man=None, max_len=None):
    """Writes each (name, blob, status, needle) of bad as d/bad_NAME.EXT
    (only blobs up to max_len bytes when it is given); with man, appends
    its "bad" line."""
    for name, blob, status, needle in bad:
        if max_len is not None and len(blob) > max_len:
            continue
        fn = "bad_%s.%s" % (name, ext)
        write_bytes(os.path.join(d, fn), blob)
        if man is not None:
            man.append("bad %s %s %s" % (fn, status, needle))


def write_cuts(d, stem, ext, data, cuts):
    """Fuzz seeds: data cut at each length of cuts, as d/STEM_cutN.EXT."""
    for cut in cuts:
        write_bytes(os.path.join(d, "%s_cut%d.%s" % (stem, cut, ext)), data[:cut])


def write_manifest(out, man, tool, seed):
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(man) + "\n")
    print("%s: %d manifest lines in %s (seed %d)" % (tool, len(man), out, seed))
