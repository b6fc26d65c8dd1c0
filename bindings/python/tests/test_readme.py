"""The README's first-steps example runs as written."""
import os
import pathlib
import re


def test_readme_example_runs(tmp_path):
    text = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert (tmp_path / "state").is_dir()
