"""A Triton Python-backend model with a known service time, for llmtop's real-engine tests.

Each execution (one dynamic batch) sleeps ``service_s`` (config parameter) and echoes
INPUT0 as OUTPUT0. A request whose INPUT0 is negative makes the execution raise, so Triton
counts every request of that batch as ``nv_inference_request_failure{reason="BACKEND"}``
(a model that *returns* an error response is counted as a success).
"""

import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.service_s = float(params.get("service_s", {}).get("string_value", "0.05"))

    def execute(self, requests):
        time.sleep(self.service_s)
        inputs = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        if any((x < 0).any() for x in inputs):
            raise pb_utils.TritonModelException("negative INPUT0: failing on purpose")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]) for x in inputs]
