# Sourced by the device scripts: the pure-Python dependencies carried as wheels in .whl/ (the GPU
# machine cannot reach a registry; see README, "Real hardware"), the checkout in its installed layout
# (kernel_scientist.agents is agents/, ...; scripts/installed_layout.py), and unbuffered output.
python3 scripts/installed_layout.py /tmp/ks-layout >/dev/null || exit 1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:/tmp/ks-layout || exit 1
else
  export PYTHONPATH=/tmp/ks-layout
fi
export PYTHONUNBUFFERED=1
# From the checkout's root, plain `python3 -m kernel_scientist` would import the checkout's kernel_scientist/
# folder (the current directory comes first on sys.path) instead of the layout: the scripts call
# `python3 -P -m kernel_scientist` (Python 3.11+: no current directory on sys.path).
