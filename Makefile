# The PyTorch book. `make` lists the targets; `make test` (or `make book`) sets everything up on
# first use; `make lab` to learn.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Touched after a successful install: the venv is (re)built when it is missing or older than
# what it was installed from.
INSTALLED := $(VENV)/.installed
NBVAL  := $(BIN)/pytest --nbval --nbval-current-env --nbval-sanitize-with nbval.cfg

.PHONY: help setup lab book report test unit test-portable test-floor outputs student publish lint lock clean
# Plain `make` lists the targets (it used to run setup; the README and pages always name one).
.DEFAULT_GOAL := help

help:  ## list the targets and what each does (plain `make` does this)
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(firstword $(MAKEFILE_LIST))

# pip runs as `python -m pip`, and is put in first where the venv has none (`uv venv` without --seed).
$(INSTALLED): requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --upgrade
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt -c constraints.txt
	touch $@

setup: $(INSTALLED)  ## create or refresh .venv: requirements.txt at the versions in constraints.txt

LAB_DIR ?= notebooks
lab: $(INSTALLED)  ## open JupyterLab on the notebooks (the Chinese edition: make lab LAB_DIR=zh_CN/notebooks)
	$(BIN)/jupyter lab $(LAB_DIR)/

# The Chinese edition (zh_CN/, written by `python -m tools.translate build`) is its own book, built
# beside the English one and copied under it, so its pages live at _build/html/zh_CN/.
book: report  ## build the website into _build/html, the Chinese edition into _build/html/zh_CN (no re-execution; warnings are errors)
	$(BIN)/jupyter-book build --all -W --keep-going .
	$(BIN)/jupyter-book build --all -W --keep-going --path-output _build/zh_CN zh_CN
	rm -rf _build/html/zh_CN && cp -R _build/zh_CN/_build/html _build/html/zh_CN

report: $(INSTALLED)  ## write book/run_report.md from the notebooks' recorded runs and `headline` outputs
	$(BIN)/python -m tools.report

# Two notebooks at a time, each on one thread: on a 2-core machine that is about 1.2x faster than one
# notebook on two threads (the stored outputs do not depend on the thread count: test-portable).
# Longest first, from a full run's report on a 2-core machine, so that the two workers end
# together; everything not named (the short notebooks and the unit tests) fills in behind.
TEST_WORKERS ?= 2
LONGEST_FIRST := notebooks/06_training_a_cnn.ipynb notebooks/deeper/speedrun.ipynb notebooks/07_tuning.ipynb \
	tests/test_site.py notebooks/12_onnx_deployment.ipynb notebooks/03_datasets_and_dataloaders.ipynb \
	notebooks/11_distributed_ddp.ipynb notebooks/10_torch_compile.ipynb notebooks/08_saving_and_loading.ipynb \
	notebooks/09_mixed_precision.ipynb notebooks/13_profiling.ipynb notebooks/14_error_gallery.ipynb
test: $(INSTALLED)  ## everything: unit tests, strict nbval over every notebook, hygiene, the site in a browser
	OMP_NUM_THREADS=1 $(NBVAL) -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		$(LONGEST_FIRST) tests notebooks

unit: $(INSTALLED)  ## the fast tier (under a minute): unit and hygiene tests, no notebooks, no site, no slow tests
	$(BIN)/pytest tests -m "not slow" --ignore=tests/test_site.py -q

# The strict notebook suite as other machines see it: torch's kernels held to a lower instruction
# set (an AVX2 laptop or CI runner; then no vector instructions at all) and other thread counts.
# It cannot simulate a GPU, another OS or another torch release (see test-floor for that).
test-portable: $(INSTALLED)  ## strict nbval under AVX2 + 1 thread, then generic kernels + 3 threads
	ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 $(NBVAL) notebooks -q
	ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 OMP_NUM_THREADS=3 $(NBVAL) notebooks -q

# The oldest versions requirements.txt admits, in their own venv: every cell must run and every
# assert hold (outputs are not compared: they were recorded with constraints.txt).
# The floor's NumPy 1.26 and Matplotlib 3.8 have wheels up to Python 3.12 only, and the book needs 3.11:
# where python3 is newer, name one, `make test-floor FLOOR_PYTHON=python3.12`.
FLOOR_VENV := .venv-floor
FLOOR_PYTHON ?= $(PYTHON)
test-floor:  ## run every notebook and the unit tests on the floor versions of constraints-floor.txt
	test -x $(FLOOR_VENV)/bin/python || $(FLOOR_PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip --version >/dev/null 2>&1 || $(FLOOR_VENV)/bin/python -m ensurepip --upgrade
	$(FLOOR_VENV)/bin/python -m pip install --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install -r requirements.txt -c constraints-floor.txt
	$(FLOOR_VENV)/bin/pytest --nbval-lax --nbval-current-env notebooks tests -m "not slow" \
		--ignore=tests/test_site.py -p no:cacheprovider -q

outputs: $(INSTALLED)  ## re-execute every notebook in place on a fresh kernel (NB=notebooks/05_*.ipynb for one)
	$(BIN)/python -m tools.outputs $(NB)

student: $(INSTALLED)  ## write student copies of the notebooks into student/ (exercise solutions replaced by stubs)
	$(BIN)/python -m tools.student

# Instructors: `make book publish` pushes _build/html to the gh-pages branch of REMOTE
# (a remote name or URL; then serve GitHub Pages from that branch).
REMOTE ?= origin
publish:  ## push the built site to the gh-pages branch of $(REMOTE) (run `make book` first)
	@test -f _build/html/index.html || { echo "_build/html/index.html not found: build the site first with 'make book'"; exit 1; }
	$(BIN)/ghp-import --no-jekyll --push --force --branch gh-pages --remote $(REMOTE) \
		--message "Publish the book" _build/html

lint: $(INSTALLED)  ## ruff check and format check
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

lock: $(INSTALLED)  ## rewrite constraints.txt from .venv (after re-recording outputs on new versions)
	{ sed -n '/^#/p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable \
		| grep -vE '^(nvidia-|triton|cuda-|#|-e )' | grep -v pytorch-book-utils; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:  ## delete the built site (_build/) and the student copies (student/)
	rm -rf _build student
