"""Saving a program and replaying one on a pair of workers: what the
command lines of tests.transport_diff and tests.hostile both do. It knows
neither machine nor which bugs a difference shows (the caller says)."""

import json
import os

from . import compare


def save(directory, program, name):
    """Writes program as JSON to directory/name; returns the path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(program, f, indent=1)
    return path


def replay(pair, path, show, bugs):
    """Runs the program saved at path on both loops of pair, prints every
    observation with show, then the first difference and what
    bugs(diff, program) says it shows; 1 if they differ, else 0."""
    with open(path) as f:
        program = json.load(f)
    ref, other = pair.run(program)
    if show:
        for name, answer in zip(pair.names, (ref, other), strict=True):
            print(f"== {name} {answer['notes']}")
            for entry in answer["obs"]:
                print("  " + json.dumps(entry))
    diff = compare.first_difference(ref["obs"], other["obs"], pair.names)
    if diff is None:
        print("no difference")
        return 0
    print(diff.describe((ref["notes"], other["notes"])))
    print("bugs it shows:", bugs(diff, program) or "none")
    return 1
