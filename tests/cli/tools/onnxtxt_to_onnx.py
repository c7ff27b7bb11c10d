"""`onnxtxt_to_onnx.py SRC DST`: parse ONNX text syntax and save the binary model.

The golden tests keep models readable (ONNX text in the test file) and make the .onnx a test
needs from it, so no binary model is committed.
"""

import sys

import onnx
import onnx.parser


def main() -> int:
    source, destination = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as stream:
        model = onnx.parser.parse_model(stream.read())
    onnx.save(model, destination)
    return 0


if __name__ == "__main__":
    sys.exit(main())
