import pytest
import torch

from utils.device import available_types, get_device


def test_default_is_best_available():
    assert get_device().type == available_types()[0]
    assert available_types()[-1] == "cpu"


def test_cpu_always_works():
    assert get_device("cpu") == torch.device("cpu")


def test_unknown_name_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown device 'gpu'.*cuda, mps, xpu, cpu"):
        get_device("gpu")


def test_known_but_unsupported_type_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown device 'meta'"):
        get_device("meta")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_where_there_is_none():
    with pytest.raises(RuntimeError, match=r"no cuda device is usable.*python -m utils.env"):
        get_device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_index_out_of_range():
    with pytest.raises(RuntimeError, match="CUDA device"):
        get_device(f"cuda:{torch.cuda.device_count()}")
