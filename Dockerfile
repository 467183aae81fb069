# simsplit on NVIDIA GPUs: docker run --gpus all simsplit run cases/cavity.yaml
# The runtime image carries libcudart and libnvrtc, all CuPy needs to compile the kernels.
FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04

ARG EXTRAS=gpu
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/simsplit \
    PATH=/opt/simsplit/bin:$PATH \
    SIMSPLIT_CACHE_DIR=/home/simsplit/.cache/simsplit

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/simsplit

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY simsplit ./simsplit
# setup.py copies kernels/ into the wheel as simsplit/kernels/
COPY kernels ./kernels
RUN pip install --no-cache-dir ".[${EXTRAS}]" \
    && rm -rf /src

RUN useradd --create-home --uid 1000 simsplit
COPY --chown=simsplit:simsplit cases /home/simsplit/cases
USER simsplit
WORKDIR /home/simsplit
# Compile the CPU kernels (Numba) now, as the user that runs them: site-packages is not theirs
# to write, so the cache goes to ~/.cache/numba. CPU runs in the container then start without
# compiling. Numba keys the cache by CPU model: on another model the first CPU run compiles.
RUN simsplit warmup

ENTRYPOINT ["simsplit"]
CMD ["--help"]
