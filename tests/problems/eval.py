"""A run directory's main, as the format's config.main names it: `python eval.py KEY=VALUE...`
runs submission.custom_kernel on one input and prints the folder's own verdict. The evaluator does
not use it (it has its own hardened harness); it is here so that the files: list is the real
format's, with a helper that itself imports reference (served on demand, never run eagerly)."""

import sys

from reference import check_implementation, generate_input


def main() -> int:
    from submission import custom_kernel

    kwargs = {k: int(v) for k, v in (a.split("=", 1) for a in sys.argv[1:])}
    data = generate_input(**kwargs)
    result = check_implementation(data, custom_kernel(data))
    ok, message = result if isinstance(result, tuple) else (not result, result)
    print("pass" if ok else f"fail: {message}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
