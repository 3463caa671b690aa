# Positional Encoding, Corrected: build the book and run the tests from a machine with only python3.
#
#   make test     pytest (package) + nbval in strict mode on every notebook in the TOC, side by side (TEST_JOBS)
#   make test-package / make test-notebooks  the two halves of make test: pytest on tests/ only, nbval only
#   make jdk      check that the JDK make test needs (javac, javap, java) is installed
#   make test-portable  nbval again under other BLAS/ATen kernels and another thread count (portability policy)
#   make book     HTML book in _build/html, warnings are errors
#   make execute  re-run every TOC notebook in place (deterministic) after an intended change
#   make test-site  open every page of _build/html in headless Chromium (offline math, links, search, mobile,
#                 nothing cut off at 1280 and 390 px, Chinese text drawn by the served font); SITE=... for another build
#   make pdf      the whole book as one PDF in _build/pdf/ (headless Chromium, offline)
#   make serve    serve the book on http://127.0.0.1:8000 (PORT=...): both editions (_build/site) once make book-zh ran
#   make site     both editions side by side in _build/site, as served and published (after make book and make book-zh)
#   make lab      JupyterLab on book/ with course_pe importable and MyST rendered (jupyterlab-myst)
#   make lab-student  JupyterLab on workbook/ (made first if missing), without nbgrader's instructor menus
#   make workbook student notebooks (solutions replaced by stubs) into workbook/
#   make grade NB=submission.ipynb STUDENT=name [ASSIGNMENT=chapter] [REPLACE=1]   grade a submission into grades/
#   make grade DIR=submissions/ [ROSTER=roster.csv] [ASSIGNMENT=chapter] [JOBS=n] [REPLACE=1]   a whole folder
#                 (as root: each submission in its own namespaces and cgroup; ISOLATION=limited to grade without)
#   make nbgrader an nbgrader course folder (source notebooks + nbgrader_config.py, sandboxed autograde) into nbgrader/
#   make gradescope  one Gradescope autograder per assignment: gradescope/<chapter>/autograder.zip (instructor guide)
#   make book-student  the HTML book without solutions, into _build/student/_build/html
#   make book-zh  the Chinese edition into _build/html-zh (prose from locale/zh_CN; make locale-update refreshes it)
#   make workbook-zh  the Chinese student notebooks into workbook-zh/ (same stubs, checks and grader as make workbook)
#   make lab-student-zh  JupyterLab on workbook-zh/ (made first if missing), as make lab-student
#   make book-student-zh  the Chinese HTML book without solutions, into _build/student-zh/_build/html
#   make pdf-zh   the Chinese edition as one PDF, _build/pdf/positional-encoding-corrected-zh.pdf (CJK font embedded)
#   make mutation mutation testing (mutmut) of the five core modules and positions.py in a temporary copy; slow (about
#                 an hour on one core of a busy machine), not part of `make test` or CI; see tests/MUTATION.md
#   make clean    remove build outputs (make distclean also removes .venv)
#   make install  create .venv and install the pins (every target that needs Python does this first)
#   make install-triton  add Triton (requirements-triton.txt) for the fused RoPE kernel's tests; make test does it
#   make help     print this list
#
# The first target that needs Python creates .venv and installs requirements.txt and the package
# (editable). It re-installs only when requirements.txt or pyproject.toml change (hash stamp).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PINS := $(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
STAMP := $(VENV)/.installed-$(PINS)
# pip warns about every configured index folder that does not exist on this machine; hide only that.
PIP_NOISE := /is ignored: it is neither a file nor a directory/d

# Determinism: a fixed thread count everywhere (runs with the same count are bit-identical; stored outputs must not
# depend on it: see the portability policy, and test-portable re-runs with another count), one kernel at a time, fixed
# hash seed, no user site packages. One thread: the course's models are small, and two OpenMP threads on a machine
# where anything else runs spin-wait for each other (a training cell measured 5-10 times slower); OMP_WAIT_POLICY=passive
# makes a waiting thread sleep instead of spinning when more threads are asked for.
export COURSE_PE_THREADS ?= 1
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export OMP_WAIT_POLICY ?= passive
export PYTHONHASHSEED := 0
export PYTHONNOUSERSITE := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export JUPYTER_PLATFORM_DIRS := 1

.PHONY: book-zh locale-update
.PHONY: mutation install test test-package test-notebooks test-portable book book-student test-site execute serve lab workbook grade nbgrader clean distclean
.PHONY: gradescope
.PHONY: jdk lab-student pdf help
.PHONY: site
.PHONY: workbook-zh lab-student-zh book-student-zh pdf-zh
.PHONY: install-triton

# make help: the comment block at the top of this file, without its comment marks.
help:
	@awk '!/^#/ {exit} {sub(/^# ?/, ""); print}' $(firstword $(MAKEFILE_LIST))

install: $(STAMP)

# torch: PyPI's default torch wheel for Linux is the CUDA build (several GB of NVIDIA libraries). On Linux torch is
# installed first, alone (--no-deps), from PyTorch's CPU wheel index as an extra index, unless the machine has an
# NVIDIA GPU (nvidia-smi works) or TORCH_BUILD=cuda is given; TORCH_BUILD=cpu forces the CPU build. macOS and Windows
# wheels on PyPI are CPU builds already. Nothing else is looked up on that index.
TORCH_BUILD ?= auto
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell grep -E '^torch==' requirements.txt)
TORCH_CPU := $(if $(filter cpu,$(TORCH_BUILD)),yes,$(if $(filter auto,$(TORCH_BUILD)),$(shell [ "$$(uname -s)" = Linux ] && ! nvidia-smi -L > /dev/null 2>&1 && echo yes)))

$(STAMP): requirements.txt pyproject.toml
	@echo "==> installing into $(VENV) (the first time: about 5 minutes and 1.9 GB of disk; again only when requirements.txt or pyproject.toml change)"
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || echo "==> warning: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); the pins are made and tested for 3.11"
	@test -x $(BIN)/python || { echo "==> creating the virtual environment $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@if [ -n "$(TORCH_CPU)" ]; then \
	    echo "==> installing $(TORCH_PIN), CPU build, from PyTorch's CPU wheel index (TORCH_BUILD=cuda for the CUDA build)"; \
	    tools/pip_install.sh $(BIN)/python --no-deps --extra-index-url $(TORCH_CPU_INDEX) $(TORCH_PIN); fi
	@echo "==> installing $$(grep -c '==' requirements.txt) pinned packages; pip prints each one it collects or downloads"
	@tools/pip_install.sh $(BIN)/python -r requirements.txt
	@$(BIN)/python -c "import torch, myst_nb, nbval" || { echo "==> pip did not install the pins; see the messages above"; exit 1; }
	@if [ -n "$(TORCH_CPU)" ]; then $(BIN)/python -c "import sys, torch; sys.exit(torch.version.cuda is not None)" \
	    || { echo "==> torch is the CUDA build although the CPU build was asked for (was PyTorch's CPU index unreachable?); pip uninstall torch, then make install again"; exit 1; }; fi
	@echo "==> installing course_pe (editable) and the notebook kernel"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | sed '$(PIP_NOISE)'
	@$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (course_pe)" > /dev/null
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "==> $(VENV) is ready ($$(du -sh $(VENV) | cut -f1))"

# Triton, for the fused RoPE kernel's tests (tests/test_rope_triton.py run it on the CPU through Triton's interpreter).
# PyTorch's CUDA wheels bring it; the CPU wheels that make install takes on Linux do not, and it takes about 700 MB, so
# it is installed for the tests (make test, make test-package), not for reading the book. make install-triton alone
# installs it. Linux x86_64 only (Triton publishes no other wheels); elsewhere the kernel is not used.
TRITON_STAMP := $(VENV)/.triton-$(shell cat requirements-triton.txt | sha256sum | cut -c1-16)
install-triton: $(TRITON_STAMP)

$(TRITON_STAMP): requirements-triton.txt $(STAMP)
	@echo "==> installing $$(grep -E '^triton==' requirements-triton.txt) for the fused RoPE kernel's tests (about 700 MB; requirements-triton.txt)"
	@tools/pip_install.sh $(BIN)/python --no-deps -r requirements-triton.txt
	@rm -f $(VENV)/.triton-*
	@touch $@

NOTEBOOKS = $(shell $(BIN)/python tools/book_tools.py notebooks)
# The same notebooks, the longest-running first, so that side-by-side runs end together.
NOTEBOOKS_FOR_TESTS = $(shell $(BIN)/python tools/book_tools.py notebooks --longest-first)

# Side by side: every notebook runs one thread (COURSE_PE_THREADS), so the tests run in as many pytest-xdist workers
# as there are cores per thread; a notebook stays whole in one worker (--dist loadfile keeps its cells in order).
# TEST_JOBS=1 runs everything in one process. Stored outputs do not depend on it (make test-portable checks them).
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); t=$${COURSE_PE_THREADS:-1}; j=$$((n / t)); echo $$((j > 0 ? j : 1)))
XDIST = $(if $(filter-out 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile)
NBVAL = --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

# make test: the package tests and every notebook in one pytest run, side by side.
test: $(STAMP) $(TRITON_STAMP) jdk
	COURSE_PE_REQUIRE_JDK=1 $(BIN)/python -m pytest -q $(XDIST) $(NBVAL) --durations=15 $(NOTEBOOKS_FOR_TESTS) tests

test-package: $(STAMP) $(TRITON_STAMP)
	$(BIN)/python -m pytest -q $(XDIST) --durations=10 tests

# Three notebooks compile the sources' Java (javac, javap, java). A reader without a JDK sees those checks announced as
# not run; under the tests (COURSE_PE_REQUIRE_JDK=1) a missing JDK is a failure, reported here before anything runs.
JDK_HINT = make test needs a JDK (javac, javap, java) for the notebooks that compile the sources' Java. Debian/Ubuntu: sudo apt-get install default-jdk-headless; macOS: brew install openjdk
jdk:
	@for tool in javac javap java; do command -v $$tool > /dev/null || { echo "==> $(JDK_HINT)"; exit 1; }; done

test-notebooks: $(STAMP) jdk
	@test -n "$(NOTEBOOKS)" || { echo "no notebooks found in _toc.yml"; exit 1; }
	COURSE_PE_REQUIRE_JDK=1 $(BIN)/python -m pytest -q $(XDIST) $(NBVAL) --durations=5 $(NOTEBOOKS_FOR_TESTS)

# Portability: the stored outputs were made with the machine's best kernels and one thread. Re-run every notebook
# with other NumPy/OpenBLAS and PyTorch/ATen kernels and two threads, as another laptop or server would; a stored
# number that depends on the machine fails here. Other choices: make test-portable PORTABLE_KERNELS="..."
# (OpenBLAS: Haswell, Zen, Sandybridge, Nehalem, Prescott; ATen: default, avx2, avx512; a kernel the CPU lacks dies
# with "Illegal instruction").
PORTABLE_KERNELS ?= OPENBLAS_CORETYPE=Sandybridge ATEN_CPU_CAPABILITY=default
PORTABLE_THREADS ?= 2
test-portable: $(STAMP)
	@echo "==> nbval with $(PORTABLE_KERNELS) and $(PORTABLE_THREADS) thread(s)"
	env $(PORTABLE_KERNELS) COURSE_PE_THREADS=$(PORTABLE_THREADS) OMP_NUM_THREADS=$(PORTABLE_THREADS) \
	    MKL_NUM_THREADS=$(PORTABLE_THREADS) $(MAKE) --no-print-directory test-notebooks

book: $(STAMP)
	$(BIN)/jupyter-book build . --builder html -W -n --keep-going

execute: $(STAMP)
	COURSE_PE_REQUIRE_JDK=1 $(BIN)/python tools/book_tools.py execute $(NB)

# The student edition is built from a copy of the sources in which every notebook went through the workbook
# transformation (solutions removed, stored outputs kept except for stubs and check cells); its pages then lose
# the "Your answer here." placeholders (book_tools.py student-pages), which only make sense in a notebook. Its pages
# have no Binder/Colab/edit buttons (they would open the repository's notebooks, with solutions); the download
# button gives the page's workbook notebook. check-student-site fails the build if any link reaches a solution.
STUDENT_SRC := _build/student_src
book-student: $(STAMP)
	rm -rf $(STUDENT_SRC) && mkdir -p $(STUDENT_SRC)
	cp -r book tools _toc.yml references.bib $(STUDENT_SRC)/
	$(BIN)/python tools/book_tools.py student-config _config.yml $(STUDENT_SRC)/_config.yml
	$(BIN)/python -m course_pe.coursework.workbook $(NOTEBOOKS) --out $(STUDENT_SRC) --keep-outputs > /dev/null
	$(BIN)/python tools/book_tools.py student-pages $(STUDENT_SRC)
	$(BIN)/jupyter-book build $(STUDENT_SRC) --path-output _build/student --builder html -W -n --keep-going
	$(BIN)/python tools/book_tools.py check-student-site _build/student/_build/html

workbook: $(STAMP)
	$(BIN)/python -m course_pe.coursework.workbook $(NOTEBOOKS) --out workbook

# The Chinese edition (issue 28; tools/zh_edition.py, /work/coord/zh-translator-guide.md): the English notebooks with
# their prose taken from locale/zh_CN/LC_MESSAGES/*.po (same code, same stored outputs), generated into $(ZH_SRC)
# and built into _build/html-zh. locale-update refreshes the catalogues after the English changed (changed strings
# become fuzzy); `python tools/zh_edition.py status --list` says what is left to translate, per document.
ZH_SRC := _build/zh/src
book-zh: $(STAMP)
	$(BIN)/python tools/zh_edition.py sources $(ZH_SRC)
	$(BIN)/jupyter-book build $(ZH_SRC) --path-output _build/zh --builder html -W -n --keep-going
	rm -rf _build/html-zh && cp -r _build/zh/_build/html _build/html-zh

locale-update: $(STAMP)
	$(BIN)/python tools/zh_edition.py update

# Coursework in Chinese (issue 36; the instructor guide's section "Assigning the course in Chinese"): the Chinese
# notebooks through the same workbook and student-edition transformations as the English ones. A Chinese submission
# is graded by make grade like any other (the grader reads code cells; the folder names the chapter).
workbook-zh: $(STAMP)
	$(BIN)/python tools/zh_edition.py workbook workbook-zh

lab-student-zh: $(STAMP)
	@test -d workbook-zh || $(MAKE) --no-print-directory workbook-zh
	@$(BIN)/jupyter labextension list 2>&1 | grep -q "jupyterlab-myst.*enabled" || $(BIN)/jupyter labextension enable jupyterlab-myst
	JUPYTER_CONFIG_PATH=$(CURDIR)/tools/student_lab $(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) workbook-zh

STUDENT_ZH_SRC := _build/student_zh_src
book-student-zh: $(STAMP)
	$(BIN)/python tools/zh_edition.py student-sources $(STUDENT_ZH_SRC)
	$(BIN)/jupyter-book build $(STUDENT_ZH_SRC) --path-output _build/student-zh --builder html -W -n --keep-going
	$(BIN)/python tools/book_tools.py check-student-site _build/student-zh/_build/html

# The Chinese PDF: the single-page build of the Chinese sources, printed like make pdf; it checks that every chapter's
# Chinese title is in the text of its page, that a CJK font is embedded and that no character fell back to a box.
pdf-zh: $(STAMP)
	$(BIN)/python tools/zh_edition.py sources $(ZH_SRC)
	$(BIN)/jupyter-book build $(ZH_SRC) --path-output _build/zh --builder singlehtml -W -n --keep-going
	$(BIN)/python tools/zh_edition.py pdf --site _build/zh/_build/singlehtml --toc $(ZH_SRC)/_toc.yml \
	    --out _build/pdf/positional-encoding-corrected-zh.pdf

# NB, DIR, ROSTER, ROSTER_COLUMN, STUDENT, ASSIGNMENT, JOBS, GRADES, REPLACE and ISOLATION reach the grader through
# the environment, unexpanded (a `$(...)` in a file name stays text): no shell, and no make function, ever sees a file
# or student name.
GRADE_VARIABLES := NB DIR ROSTER ROSTER_COLUMN STUDENT ASSIGNMENT JOBS GRADES REPLACE ISOLATION
$(foreach v,$(GRADE_VARIABLES),$(eval override $(v) := $$(value $(v))))
grade: export NB := $(NB)
grade: export DIR := $(DIR)
grade: export ROSTER := $(ROSTER)
grade: export ROSTER_COLUMN := $(ROSTER_COLUMN)
grade: export STUDENT := $(STUDENT)
grade: export ASSIGNMENT := $(ASSIGNMENT)
grade: export JOBS := $(JOBS)
grade: export GRADES := $(GRADES)
grade: export REPLACE := $(REPLACE)
grade: export ISOLATION := $(ISOLATION)
grade: $(STAMP)
	@$(BIN)/python -m course_pe.coursework.grade --from-env --out grades

# nbgrader itself is pinned in requirements.txt: run its commands with .venv/bin on PATH (source .venv/bin/activate).
# The nbgrader_config.py it writes makes `nbgrader autograde` grade in course_pe's sandbox instead of a kernel.
nbgrader: $(STAMP)
	$(BIN)/python -m course_pe.coursework.nbgrader_release $(NOTEBOOKS) --out nbgrader

# Gradescope: one zip per chapter with coding exercises (setup.sh, run_autograder, the grader's pins, the course_pe
# wheel; no notebook, no solution). Upload gradescope/<chapter>/autograder.zip; see the instructor guide.
gradescope: $(STAMP)
	$(BIN)/python -m course_pe.coursework.gradescope build --out gradescope

# The site test needs Debian's chromium (/usr/bin/chromium) and playwright (requirements.txt); it tells how to
# install whichever is missing. Screenshots go to _build/site-test/.
# SITE_ROOT is the folder served at the web root, SITE an edition inside it. With no SITE, and the Chinese edition
# built, the test assembles _build/site (make site) and tests the English edition there, as make serve and the
# published site lay it out, so every language-switch link is followed; otherwise it tests _build/html alone and says
# that it cannot check the switch links.
SITE ?=
SITE_ROOT ?=
SITE_TEST_ARGS ?=
test-site: $(STAMP)
	@if [ -z "$(SITE)" ] && [ -f _build/html-zh/index.html ]; then $(MAKE) --no-print-directory site; fi
	@site="$(SITE)"; root="$(SITE_ROOT)"; \
	if [ -z "$$site" ]; then if [ -f _build/html-zh/index.html ]; then site=$(SITE_DIR)/html; root=$(SITE_DIR); else site=_build/html; fi; fi; \
	test -f "$$site/index.html" || { echo "no built site in $$site: run 'make book' first"; exit 1; }; \
	set -x; $(BIN)/python tools/site_test.py --site "$$site" --root "$${root:-$$site}" --out _build/site-test $(SITE_TEST_ARGS)

# Both editions as they are served and published: _build/site/html (English), _build/site/html-zh (Chinese), the
# layout the language switch's links expect, and an index.html that opens the English edition (tools/edition_switch.py).
SITE_DIR := _build/site
site: $(STAMP)
	$(BIN)/python tools/edition_switch.py site --en _build/html --zh _build/html-zh --out $(SITE_DIR)

# The whole book as one PDF, offline (tools/book_pdf.py): the single-page build, printed by headless Chromium (the
# same browser as the site test) with page numbers, a table of contents and one bookmark per part and chapter.
pdf: $(STAMP)
	$(BIN)/jupyter-book build . --builder singlehtml -W -n --keep-going
	$(BIN)/python tools/book_pdf.py --site _build/singlehtml --out _build/pdf/positional-encoding-corrected.pdf

PORT ?= 8000
# Both editions when the Chinese one is built (make site first, so the "中文" switch works); otherwise the English one
# alone, whose "中文" links then go nowhere (said before it starts).
serve:
	@test -d _build/html || { echo "run 'make book' first"; exit 1; }
	@if [ -f _build/html-zh/index.html ]; then \
	    $(MAKE) --no-print-directory site > /dev/null; \
	    echo "serving both editions ($(SITE_DIR)) on http://127.0.0.1:$(PORT): English at /html/, Chinese at /html-zh/ (Ctrl-C to stop)"; \
	    exec $(PYTHON) -m http.server --bind 127.0.0.1 --directory $(SITE_DIR) $(PORT); \
	else \
	    echo "serving _build/html on http://127.0.0.1:$(PORT) (Ctrl-C to stop); the Chinese edition is not built, so its '中文' links go nowhere: make book-zh, then make serve again"; \
	    exec $(PYTHON) -m http.server --bind 127.0.0.1 --directory _build/html $(PORT); \
	fi

# jupyterlab-myst (requirements.txt) renders MyST in markdown cells. JupyterLab refuses to run as root unless told.
lab: $(STAMP)
	@$(BIN)/jupyter labextension list 2>&1 | grep -q "jupyterlab-myst.*enabled" || $(BIN)/jupyter labextension enable jupyterlab-myst
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) book

# Students: JupyterLab on the workbook (solutions replaced by stubs, the book's numbers in the prose), made first if
# missing, without nbgrader's instructor menus and server extensions (tools/student_lab/ is put first on the
# configuration path).
lab-student: $(STAMP)
	@test -d workbook || $(MAKE) --no-print-directory workbook
	@$(BIN)/jupyter labextension list 2>&1 | grep -q "jupyterlab-myst.*enabled" || $(BIN)/jupyter labextension enable jupyterlab-myst
	JUPYTER_CONFIG_PATH=$(CURDIR)/tools/student_lab $(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) workbook

# Mutation testing (tests/MUTATION.md): tools/mutation/run.sh copies course_pe/, tests/ and tools/mutation/setup.cfg into
# MUTATION_DIR (default: a new temporary folder) and runs mutmut (pinned there) with one child process.
MUTATION_DIR ?=
mutation: $(STAMP)
	tools/mutation/run.sh $(abspath $(BIN))/python $(MUTATION_DIR)

clean:
	rm -rf _build .pytest_cache .hypothesis workbook grades
	rm -rf workbook-zh
	rm -rf gradescope
	find . -name __pycache__ -not -path "./$(VENV)/*" -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
