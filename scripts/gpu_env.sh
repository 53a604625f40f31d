# Sourced by the device scripts: the pure-Python dependencies carried as wheels in .whl/ (the GPU
# machine cannot reach a registry; see README, "Real hardware"), and unbuffered output.
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
