# zshard - top-level build.
#
#   make            build everything into build/ (installs Debian packages first)
#   make check      build and run every test (unit, integration, layers,
#                   exports, install, a server in another netns, rdma)
#   make test-rdma  the rdma transport on Soft-RoCE in a qemu guest
#   make asan       the same tests under AddressSanitizer + UBSan (build-asan/)
#   make demo       the main job on a local cluster
#   make bench      the benchmarks (build/bench/)
#   make install    PREFIX=/usr/local DESTDIR=: headers, libzshard, binaries,
#                   zshard.pc
#   make format     clang-format the sources
#
# One folder per layer (docs/DESIGN.md has the map); every include names its
# folder from the source root (#include "net/stream.h"), and
# tools/check-layers.sh, run by make check, fails when a lower layer
# includes a higher one. Optional parts (RDMA, CUDA/NCCL) are detected and
# announced; the rest of zshard builds without them.

BUILD ?= build
CC ?= cc
OPT ?= -O2
SAN ?=
PREFIX ?= /usr/local
DESTDIR ?=

# zshard's one version (the file VERSION): the daemons', zshardctl's, the
# library's (its soname carries the major: the ABI) and the wheel's
ZS_VERSION := $(shell cat VERSION)
ZS_MAJOR := $(firstword $(subst ., ,$(ZS_VERSION)))

ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif

# The Debian packages come first: what the build detects below must see
# them (a fresh machine would otherwise build without rdma the first time).
ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean format,$(MAKECMDGOALS)),)
# (the tests' own servers and tools only for the goals that run them)
DEPS_RC := $(shell sh tools/install-deps.sh $(if $(filter check asan fuzz fuzz-bins,$(MAKECMDGOALS)),--tests) >&2; echo $$?)
ifneq ($(DEPS_RC),0)
$(error zshard: the Debian packages above are missing)
endif
endif
endif

CFLAGS := -std=gnu11 $(OPT) -g -Wall -Wextra -Wshadow -Wno-missing-field-initializers \
	  -fno-math-errno -ffp-contract=off -pthread -MMD -MP $(SANFLAGS) $(EXTRA_CFLAGS)
# one include root: the source tree (generated code under $(BUILD)/gen/)
CPPFLAGS := -I. -I$(BUILD) -D_GNU_SOURCE -DZS_VERSION_STRING='"$(ZS_VERSION)"'
LDFLAGS := -pthread $(SANFLAGS)
# -lgrpc -lgpr is all a dynamic link needs (pkg-config lists ~90 absl libs)
CTRL_LIBS := -lprotobuf-c -lgrpc -lgpr -lssl -lcrypto
LDLIBS := -ljansson -llmdb -lmicrohttpd -lgnutls $(CTRL_LIBS) -ldl -lm

# zshard's own messages, and the part of etcd's v3 API the coordinator uses
GEN := $(BUILD)/gen/zshard.pb-c.c $(BUILD)/gen/zshard.pb-c.h $(BUILD)/gen/etcd.pb-c.c \
       $(BUILD)/gen/etcd.pb-c.h
GEN_OBJ := $(BUILD)/obj/gen/zshard.pb-c.o $(BUILD)/obj/gen/etcd.pb-c.o

HAVE_IBVERBS := $(shell test -f /usr/include/infiniband/verbs.h && echo 1)
ifeq ($(HAVE_IBVERBS),1)
RDMA_SRC := $(filter-out rdma/none.c,$(wildcard rdma/*.c))
else
RDMA_SRC := rdma/none.c rdma/info.c
endif
HAVE_NCCL := $(shell test -f /usr/local/cuda/include/nccl.h && echo 1)
RDMA_NOTE := $(if $(HAVE_IBVERBS),libibverbs found,libibverbs-dev not found)
NCCL_NOTE := $(if $(HAVE_NCCL),found under /usr/local/cuda,not found)
# CUDA: the GPU kernels (gpu/*.cu) build with nvcc wherever the toolkit is
# (every machine of this project); they run only where a device is. The
# flags give the host kernels' IEEE arithmetic: no fused multiply-add, IEEE
# division and square root, subnormals kept (tests/gpu/check-ptx.sh checks)
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
HAVE_NVCC := $(wildcard $(NVCC))
NVCC_IEEE := -fmad=false -prec-div=true -prec-sqrt=true -ftz=false
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
NVCCFLAGS := -O3 -std=c++17 $(NVCC_IEEE) $(NVCC_ARCH) -I. -Xcompiler -Wall,-Wextra,-fPIC -Werror all-warnings
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
GPU_OBJ := $(patsubst %.cu,$(BUILD)/obj/%.o,$(wildcard gpu/*.cu))
ifeq ($(MAKELEVEL),0)
$(info zshard: optional parts: rdma: $(RDMA_NOTE)$(if $(HAVE_IBVERBS),, - the rdma transport is left out); cuda: $(if $(HAVE_NVCC),nvcc found: the GPU kernels are built (make test-gpu runs them where a device is),nvcc not found: the GPU kernels are left out); nccl: $(NCCL_NOTE) (loaded at run time by collective jobs' trainers))
endif

# ------------------------------------------------------------ the layers
obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
BASE_SRC := $(wildcard base/*.c)
MODEL_SRC := $(wildcard model/*.c)
MATH_SRC := $(wildcard math/*.c)
STORAGE_SRC := $(wildcard storage/*.c)
NET_SRC := $(wildcard net/*.c)
CTRL_SRC := $(wildcard ctrl/*.c)
METRICS_SRC := $(wildcard metrics/*.c)
CLIENT_SRC := $(wildcard client/*.c)
# the device layer: the CUDA driver API loaded at run time, and the emulator
GPU_SRC := $(wildcard gpu/*.c)
# the shard engine (the tests and benchmarks drive it without the daemon)
ENGINE_SRC := $(wildcard engine/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
COORD_SRC := $(filter-out coord/main.c,$(wildcard coord/*.c))
CLI_SRC := $(wildcard cli/*.c)

# everything below the daemons, as one internal archive
CORE_OBJ := $(call obj,$(BASE_SRC) $(MODEL_SRC) $(MATH_SRC) $(GPU_SRC) $(STORAGE_SRC) $(NET_SRC) \
	      $(RDMA_SRC) $(CTRL_SRC) $(METRICS_SRC)) $(GEN_OBJ)
CORE_LIB := $(BUILD)/lib/libzscore.a
ENGINE_OBJ := $(call obj,$(ENGINE_SRC))
# the engine's GPU-resident shards run gpu/*.cu's kernels where nvcc is:
# linked with the static CUDA runtime (it loads the driver when a device is
# opened, so the daemons run on machines without one)
ifneq ($(HAVE_NVCC),)
ENGINE_GPU := $(GPU_OBJ)
ENGINE_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -lrt
$(BUILD)/obj/gpu/kern.o: TARGET_FLAGS := -DZS_HAVE_CUDA_KERNELS
endif
SERVER_OBJ := $(call obj,$(SERVER_SRC))
COORD_OBJ := $(call obj,$(COORD_SRC))

BINS := $(BUILD)/bin/zshard-coordinator $(BUILD)/bin/zshard-server $(BUILD)/bin/zshardctl

# the deterministic simulator (sim/): its worlds run the protocol's pure
# cores; its mutant build plants bugs in them (base/mutant.h) and must find
# each (make sim-mutants)
SIM_SRC := $(wildcard sim/*.c)
SIM_CORES := model/liveness.c model/membership.c model/resize.c model/world.c model/failover.c model/redo.c model/hptables.c model/commit.c model/normx.c model/relaytree.c model/boundary.c model/verdict.c engine/answered.c engine/conns.c engine/intake.c engine/copies.c engine/kept.c \
	     base/mutant.c base/status.c \
	     base/strerror.c
SIM := $(BUILD)/bin/zshard-sim
SIM_MUT := $(BUILD)/sim-mut/zshard-sim
SEEDS ?= 10000
MUTANT_SEEDS ?= 100000
HOURS ?= 1

# libzshard: the trainer's and the reader's library, only what they need
# (no LMDB, no jansson, no engine; the data plane's listener, which a
# relaying reader serves its children with); the shared one exports only
# include/'s API
LIB_SRC := $(CLIENT_SRC) gpu/dev.c gpu/emu.c gpu/emu_shm.c gpu/cudadrv.c gpu/coll.c gpu/coll_emu.c gpu/nccl.c gpu/kern.c \
	   math/optim.c math/bsum.c $(BASE_SRC) model/model.c model/hparams.c model/world.c model/redo.c model/hptables.c model/boundary.c model/verdict.c model/resume.c $(NET_SRC) \
	   $(RDMA_SRC) $(filter-out ctrl/etcd.c ctrl/etcd_dec.c ctrl/seal.c,$(CTRL_SRC))
LIB_LIBS := $(CTRL_LIBS) -ldl -lm
LIB_OBJ := $(call obj,$(LIB_SRC)) $(BUILD)/obj/gen/zshard.pb-c.o
PIC_OBJ := $(patsubst $(BUILD)/obj/%.o,$(BUILD)/pic/%.o,$(LIB_OBJ))
LIBZS_A := $(BUILD)/lib/libzshard.a
LIBZS_SO := $(BUILD)/lib/libzshard.so.$(ZS_VERSION)
# Debian's python3 (with python3-numpy from tools/install-deps.sh), not
# whatever python3 comes first in PATH
PYTHON ?= /usr/bin/python3
LIBZS_LINKS := $(BUILD)/lib/libzshard.so.$(ZS_MAJOR) $(BUILD)/lib/libzshard.so
PUBLIC_H := include/zshard.h include/zshard_reader.h include/zshard_status.h

UNIT_TESTS := placement codec kv util pool spec_json optim bsum wire arena transport hello dtls engine frozen world reader pins plan metrics \
	      config phase unit liveness intake copies promote redo hptables kept commit normx answered quant relaytree boundary verdict resume membership resize \
	      $(if $(HAVE_NVCC),gpu)
INTEG_TESTS := cluster train driver ckpt transfer crash device collective scale security etcd norms catalog recovery replica failover seal
TEST_BINS := $(UNIT_TESTS:%=$(BUILD)/tests/test_%) $(INTEG_TESTS:%=$(BUILD)/tests/test_%)
TEST_HARNESS := $(BUILD)/obj/tests/harness.o

# the manual pages, from the tables the programs check their flags with
# (zshardctl man) and zshard-local's --help text (man -l build/man/X.1)
MAN_PAGES := $(addprefix $(BUILD)/man/,zshard-server.1 zshard-coordinator.1 zshardctl.1 \
	     zshard-local.1)
.PHONY: sim sim-replay sim-soak sim-mutants
.PHONY: all native wheel check check-layers check-env check-exports check-version check-man check-install check-foreign test-rdma test-gpu test-faults test-ops test-slurm test-image asan demo gpt torch-venv bench fuzz fuzz-bins \
	install format clean deps
all: $(BINS) $(LIBZS_A) $(LIBZS_SO) $(LIBZS_LINKS) \
	$(BUILD)/bin/charlm $(BUILD)/bin/read_weights $(TEST_BINS) $(BUILD)/tests/quant_codes \
	$(MAN_PAGES) $(SIM) $(SIM_MUT)

deps:
	@sh tools/install-deps.sh --tests

$(BUILD)/man/zshard-local.1: deploy/local/zshard-local tools/local-man.sh VERSION
	@mkdir -p $(@D)
	sh tools/local-man.sh $< > $@.tmp && mv $@.tmp $@
$(BUILD)/man/%.1: $(BUILD)/bin/zshardctl
	@mkdir -p $(@D)
	$(BUILD)/bin/zshardctl man $* > $@.tmp && mv $@.tmp $@

# what a wheel carries (python/setup.py builds it with this target)
native: $(BINS) $(LIBZS_SO) $(LIBZS_LINKS)

# the wheel: python -m build with this build, auditwheel repair (the shared
# libraries bundled), in $(BUILD)/wheel; tools/wheel.sh (it makes its venv)
wheel: native
	@sh tools/wheel.sh $(BUILD)

$(GEN) &: proto/zshard.proto proto/etcd.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen -Iproto proto/zshard.proto proto/etcd.proto

$(GEN_OBJ): $(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -c -o $@ $<
$(BUILD)/pic/gen/%.o: $(BUILD)/gen/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -Wno-unused-parameter -c -o $@ $<

# every object waits for the generated header (only ctrl/ includes it), and
# is built again with another VERSION (its -D)
$(BUILD)/obj/%.o: %.c $(GEN) VERSION
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TARGET_FLAGS) -c -o $@ $<
$(BUILD)/pic/%.o: %.c $(GEN) VERSION
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TARGET_FLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

# the math runs at -O3 (GCC 12 does not vectorize these loops at -O2); it is
# elementwise IEEE arithmetic, so every vector width gives the same bits
$(BUILD)/obj/math/%.o $(BUILD)/pic/math/%.o $(BUILD)/obj/base/dtype.o $(BUILD)/pic/base/dtype.o: TARGET_FLAGS := -O3
# and so do the memory-bound baselines the benchmarks hold them against
$(BUILD)/obj/bench/baselines.o $(BUILD)/obj/bench/optim.o $(BUILD)/obj/bench/reduce.o $(BUILD)/pic/bench/%.o: TARGET_FLAGS := -O3
# the example is written as a user writes it: against the public folder
$(BUILD)/obj/examples/charlm.o $(BUILD)/obj/examples/charlm_model.o $(BUILD)/obj/examples/read_weights.o: TARGET_FLAGS := -Iinclude

$(CORE_LIB): $(CORE_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^
# the static library is one relocatable object whose internal symbols are
# made local, so it exports what the shared one does and clashes with none
# of an application's own names
$(LIBZS_A): $(PIC_OBJ)
	@mkdir -p $(@D)
	$(CC) -r -nostdlib -o $(BUILD)/lib/zshard-all.o $^
	objcopy --localize-hidden $(BUILD)/lib/zshard-all.o
	rm -f $@ && $(AR) rcs $@ $(BUILD)/lib/zshard-all.o
$(LIBZS_SO): $(PIC_OBJ)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libzshard.so.$(ZS_MAJOR) -Wl,--no-undefined \
		-o $@ $^ $(LIB_LIBS)
$(LIBZS_LINKS): $(LIBZS_SO)
	ln -sf $(notdir $<) $@


$(BUILD)/bin/zshard-coordinator: $(BUILD)/obj/coord/main.o $(COORD_OBJ) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/zshard-server: $(BUILD)/obj/server/main.o $(SERVER_OBJ) $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(ENGINE_LIBS)
$(BUILD)/bin/zshardctl: $(call obj,$(CLI_SRC)) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(SIM): $(call obj,$(SIM_SRC)) $(BUILD)/obj/engine/conns.o $(BUILD)/obj/engine/intake.o $(BUILD)/obj/engine/copies.o $(BUILD)/obj/engine/kept.o $(BUILD)/obj/engine/answered.o \
	    $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(SIM_MUT): $(SIM_SRC) $(SIM_CORES) $(wildcard sim/*.h) base/mutant.h model/liveness.h model/membership.h model/resize.h engine/conns.h \
	    engine/intake.h engine/copies.h engine/kept.h model/failover.h model/redo.h model/hptables.h \
	    model/model.h model/commit.h model/normx.h model/relaytree.h model/boundary.h model/verdict.h engine/answered.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DZS_MUTANTS -o $@ $(SIM_SRC) $(SIM_CORES) $(LDFLAGS) -lm

# make sim SEEDS=N: the kept seeds, then N more, one summary line (every
# failing seed named); make sim-replay SEED=S: one seed's trace, the same
# every time; make sim-soak HOURS=H: seeds from a fresh start for H hours;
# make sim-mutants: each planted bug found within MUTANT_SEEDS seeds, and
# each kept seed still finds its own
sim: $(SIM)
	@$(SIM) --regressions sim/regressions && $(SIM) --seeds $(SEEDS)
sim-replay: $(SIM)
	@if [ -z "$(SEED)" ]; then echo "make sim-replay SEED=S: which seed to replay"; exit 2; fi
	@$(SIM) --seed $(SEED) --trace
sim-soak: $(SIM)
	@$(SIM) --from $$(date +%s)000000 --seeds 18446744073709551615 --budget-s $$(($(HOURS) * 3600))
sim-mutants: $(SIM_MUT)
	@$(SIM_MUT) --regressions sim/regressions && $(SIM_MUT) --mutants --seeds $(MUTANT_SEEDS)

# ------------------------------------------------------------------ tests
$(BUILD)/tests/test_placement: $(BUILD)/obj/tests/unit/test_placement.o $(CORE_LIB)
$(BUILD)/tests/test_redo: $(BUILD)/obj/tests/unit/test_redo.o $(CORE_LIB)
$(BUILD)/tests/test_boundary: $(BUILD)/obj/tests/unit/test_boundary.o $(CORE_LIB)
$(BUILD)/tests/test_verdict: $(BUILD)/obj/tests/unit/test_verdict.o $(CORE_LIB)
$(BUILD)/tests/test_resume: $(BUILD)/obj/tests/unit/test_resume.o $(CORE_LIB)
$(BUILD)/tests/test_membership: $(BUILD)/obj/tests/unit/test_membership.o $(CORE_LIB)
$(BUILD)/tests/test_resize: $(BUILD)/obj/tests/unit/test_resize.o $(CORE_LIB)
$(BUILD)/tests/test_hptables: $(BUILD)/obj/tests/unit/test_hptables.o $(CORE_LIB)
$(BUILD)/tests/test_commit: $(BUILD)/obj/tests/unit/test_commit.o $(CORE_LIB)
$(BUILD)/tests/test_normx: $(BUILD)/obj/tests/unit/test_normx.o $(CORE_LIB)
$(BUILD)/tests/test_relaytree: $(BUILD)/obj/tests/unit/test_relaytree.o $(CORE_LIB)
$(BUILD)/tests/test_quant: $(BUILD)/obj/tests/unit/test_quant.o $(CORE_LIB)
# tests/python/test_quant.py's helper: E4M3 codes of fp32 values, stdin to stdout
$(BUILD)/tests/quant_codes: $(BUILD)/obj/tests/unit/quant_codes.o $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/test_answered: $(BUILD)/obj/tests/unit/test_answered.o $(BUILD)/obj/engine/answered.o $(CORE_LIB)
$(BUILD)/tests/test_codec: $(BUILD)/obj/tests/unit/test_codec.o $(CORE_LIB)
$(BUILD)/tests/test_kv: $(BUILD)/obj/tests/unit/test_kv.o $(CORE_LIB)
$(BUILD)/tests/test_util: $(BUILD)/obj/tests/unit/test_util.o $(CORE_LIB)
$(BUILD)/tests/test_pool: $(BUILD)/obj/tests/unit/test_pool.o $(CORE_LIB)
$(BUILD)/tests/test_metrics: $(BUILD)/obj/tests/unit/test_metrics.o $(CORE_LIB)
$(BUILD)/tests/test_config: $(BUILD)/obj/tests/unit/test_config.o $(CORE_LIB)
$(BUILD)/tests/test_plan: $(BUILD)/obj/tests/unit/test_plan.o $(CORE_LIB)
$(BUILD)/tests/test_spec_json: $(BUILD)/obj/tests/unit/test_spec_json.o $(CORE_LIB)
$(BUILD)/tests/test_optim: $(BUILD)/obj/tests/unit/test_optim.o $(CORE_LIB)
$(BUILD)/tests/test_bsum: $(BUILD)/obj/tests/unit/test_bsum.o $(CORE_LIB)
$(BUILD)/tests/test_wire: $(BUILD)/obj/tests/unit/test_wire.o $(CORE_LIB)
$(BUILD)/tests/test_arena: $(BUILD)/obj/tests/unit/test_arena.o $(CORE_LIB)
$(BUILD)/tests/test_transport: $(BUILD)/obj/tests/unit/test_transport.o $(BUILD)/obj/tests/unit/transport_toy.o $(CORE_LIB)
$(BUILD)/tests/test_hello: $(BUILD)/obj/tests/unit/test_hello.o $(BUILD)/obj/tests/unit/transport_toy.o $(CORE_LIB)
$(BUILD)/tests/test_dtls: $(BUILD)/obj/tests/unit/test_dtls.o $(CORE_LIB)
$(BUILD)/tests/test_engine: $(BUILD)/obj/tests/unit/test_engine.o $(BUILD)/obj/tests/unit/engine_cluster.o $(BUILD)/obj/tests/oracle.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/tests/test_engine: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/tests/test_frozen: $(BUILD)/obj/tests/unit/test_frozen.o $(BUILD)/obj/tests/unit/engine_cluster.o $(BUILD)/obj/tests/oracle.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/tests/test_frozen: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/tests/test_world: $(BUILD)/obj/tests/unit/test_world.o $(BUILD)/obj/tests/unit/engine_cluster.o $(BUILD)/obj/tests/oracle.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/tests/test_world: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/tests/test_reader: $(BUILD)/obj/tests/unit/test_reader.o $(BUILD)/obj/tests/unit/engine_cluster.o $(BUILD)/obj/tests/oracle.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/tests/test_reader: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/tests/test_pins: $(BUILD)/obj/tests/unit/test_pins.o $(BUILD)/obj/tests/unit/engine_cluster.o $(BUILD)/obj/tests/oracle.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/tests/test_pins: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/tests/test_promote: $(BUILD)/obj/tests/unit/test_promote.o $(BUILD)/obj/tests/unit/engine_cluster.o $(BUILD)/obj/tests/oracle.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/tests/test_promote: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/tests/test_phase: $(BUILD)/obj/tests/unit/test_phase.o $(BUILD)/obj/tests/unit/fsm_check.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/tests/test_phase: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/tests/test_liveness: $(BUILD)/obj/tests/unit/test_liveness.o $(BUILD)/obj/engine/conns.o $(CORE_LIB)
$(BUILD)/tests/test_intake: $(BUILD)/obj/tests/unit/test_intake.o $(BUILD)/obj/engine/intake.o $(CORE_LIB)
$(BUILD)/tests/test_copies: $(BUILD)/obj/tests/unit/test_copies.o $(BUILD)/obj/engine/copies.o $(CORE_LIB)
$(BUILD)/tests/test_kept: $(BUILD)/obj/tests/unit/test_kept.o $(BUILD)/obj/engine/kept.o $(CORE_LIB)
$(BUILD)/tests/test_unit: $(BUILD)/obj/tests/unit/test_unit.o $(BUILD)/obj/tests/unit/fsm_check.o $(BUILD)/obj/client/unit.o $(CORE_LIB)
# the CUDA kernels against the host's (skipped, with the reason, without a device)
$(BUILD)/obj/gpu/%.o: gpu/%.cu gpu/gpu.h gpu/launch.cuh math/elem.h math/bsum.h base/dtype.h include/zshard_status.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c -o $@ $<
$(BUILD)/tests/test_gpu: $(BUILD)/obj/tests/gpu/test_gpu.o $(GPU_OBJ) $(CORE_LIB)
$(BUILD)/tests/test_gpu: LDLIBS += $(CUDA_LIBS)
TRAIN_OBJ := $(TEST_HARNESS) $(BUILD)/obj/tests/oracle.o $(BUILD)/obj/tests/integration/train_common.o
$(BUILD)/tests/test_train: $(BUILD)/obj/tests/integration/test_train.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_driver: $(BUILD)/obj/tests/integration/test_driver.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_scale: $(BUILD)/obj/tests/integration/test_scale.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_ckpt: $(BUILD)/obj/tests/integration/test_ckpt.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_transfer: $(BUILD)/obj/tests/integration/test_transfer.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_crash: $(BUILD)/obj/tests/integration/test_crash.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_security: $(BUILD)/obj/tests/integration/test_security.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_replica: $(BUILD)/obj/tests/integration/test_replica.o \
	$(BUILD)/obj/tests/integration/replica_common.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_failover: $(BUILD)/obj/tests/integration/test_failover.o \
	$(BUILD)/obj/tests/integration/replica_common.o $(TRAIN_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_cluster: $(BUILD)/obj/tests/integration/test_cluster.o $(BUILD)/obj/tests/integration/cluster_cli.o $(TEST_HARNESS) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_etcd: $(BUILD)/obj/tests/integration/test_etcd.o $(TEST_HARNESS) $(CORE_LIB)
$(BUILD)/tests/test_norms: $(BUILD)/obj/tests/integration/test_norms.o $(TEST_HARNESS) $(CORE_LIB)
CATALOG_OBJ := $(TEST_HARNESS) $(BUILD)/obj/tests/integration/catalog_common.o
$(BUILD)/tests/test_catalog: $(BUILD)/obj/tests/integration/test_catalog.o $(CATALOG_OBJ) $(CORE_LIB)
$(BUILD)/tests/test_recovery: $(BUILD)/obj/tests/integration/test_recovery.o $(CATALOG_OBJ) $(CORE_LIB)
$(BUILD)/tests/test_seal: $(BUILD)/obj/tests/integration/test_seal.o $(CATALOG_OBJ) $(CORE_LIB)
DEV_OBJ := $(TRAIN_OBJ) $(BUILD)/obj/tests/integration/dev_common.o
$(BUILD)/tests/test_device: $(BUILD)/obj/tests/integration/test_device.o $(DEV_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/tests/test_collective: $(BUILD)/obj/tests/integration/test_collective.o $(DEV_OBJ) $(LIBZS_A) $(CORE_LIB)
$(BUILD)/obj/tests/%.o: tests/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(TEST_BINS):
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# check: the tests, the layering, the library's exports and install, then
# the rdma ones on Soft-RoCE in qemu (test-rdma; it says why when it cannot
# run: no root to install qemu, no RDMA in the build); tests/check.sh runs
# each part and ends with their statuses and times, and the failed ones
check: all
	@BUILD="$(BUILD)" SAN="$(SAN)" CC="$(CC)" MAKE="$(MAKE)" PYTHON="$(PYTHON)" \
	UNIT_TESTS="$(UNIT_TESTS)" INTEG_TESTS="$(INTEG_TESTS)" LIBZS_SO="$(LIBZS_SO)" TORCH_VENV="$(TORCH_VENV)" \
	HAVE_NVCC="$(HAVE_NVCC)" NVCC="$(NVCC)" NVCC_IEEE="$(NVCC_IEEE)" CUDA_HOME="$(CUDA_HOME)" \
	FUZZ_CC="$(FUZZ_CC)" FUZZ_MAKE="$(FUZZ_MAKE)" FUZZ_BUILD="$(FUZZ_BUILD)" FUZZ_TARGETS="$(FUZZ_TARGETS)" \
	CHECK_FAULTS="$(CHECK_FAULTS)" CHECK_FAULTS_REPLICAS="$(CHECK_FAULTS_REPLICAS)" \
	CHECK_FAULTS_SKEW="$(CHECK_FAULTS_SKEW)" CHECK_FAULTS_HA="$(CHECK_FAULTS_HA)" \
	CHECK_FAULTS_SHM="$(CHECK_FAULTS_SHM)" \
	sh tests/check.sh

check-layers:
	@sh tools/check-layers.sh && sh tests/lib/check-layers-fails.sh
	@$(PYTHON) tools/circles.py --none engine > /dev/null && sh tests/lib/check-circles-fails.sh
check-env: $(BUILD)/bin/zshardctl
	@sh tests/lib/check-env.sh $(BUILD)/bin/zshardctl docs/operations.md && sh tests/lib/check-env-fails.sh $(BUILD)/bin/zshardctl
check-man: $(BINS) $(MAN_PAGES)
	@sh tests/lib/check-man.sh $(BUILD)
check-version: $(BINS) $(LIBZS_SO)
	@sh tests/lib/check-version.sh $(BUILD)
check-exports: $(LIBZS_SO)
	@sh tests/lib/check-exports.sh $(LIBZS_SO) $(PUBLIC_H)
check-install: all
	@sh tests/lib/check-install.sh $(BUILD) "$(CC)" "$(SANFLAGS)"

# the wheel on a bare Debian 12 (debootstrap, as root; not in check: it
# downloads a system)
check-foreign: native
	@sh tests/python/foreign.sh $(BUILD)

test-rdma: all
	@sh tests/rdma/run.sh $(BUILD)

# where a CUDA device is: the GPU tests (make check runs them too, and
# lists them as skipped, with the reason, on machines without one): the
# kernels against the host's, trainers in device mode (test_device),
# collective jobs (test_collective; NCCL with two GPUs), the training and
# checkpoint tests with the servers on --gpu 0 (tests/gpu/run.sh)
test-gpu: all
	@CC="$(CC)" sh tests/gpu/run.sh $(BUILD) "$(NVCC)" "$(NVCC_IEEE)" "$(CUDA_HOME)"

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(PUBLIC_H) $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(LIBZS_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libzshard.so.$(ZS_VERSION) $(DESTDIR)$(PREFIX)/lib/libzshard.so.$(ZS_MAJOR)
	ln -sf libzshard.so.$(ZS_MAJOR) $(DESTDIR)$(PREFIX)/lib/libzshard.so
	install -m 644 $(LIBZS_A) $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(ZS_VERSION)|' \
	    -e 's|@LIBS_PRIVATE@|$(LIB_LIBS) -pthread|' tools/zshard.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/zshard.pc
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(PREFIX)/share/man/man1/

# ---------------------------------------------------------------- bench
BENCH_BASE := $(BUILD)/obj/bench/baselines.o
$(BUILD)/bin/coord_rpc: $(BUILD)/obj/bench/coord_rpc.o $(CORE_LIB)
$(BUILD)/bin/bench_coord_scale: $(BUILD)/obj/bench/coord_scale.o $(CORE_LIB)
$(BUILD)/bin/bench_limits: $(BUILD)/obj/bench/limits.o $(BENCH_BASE) $(CORE_LIB)
$(BUILD)/bin/bench_coll: $(BUILD)/obj/bench/coll.o $(LIBZS_A) $(CORE_LIB)
$(BUILD)/bin/bench_transport: $(BUILD)/obj/bench/transport.o $(BENCH_BASE) $(CORE_LIB)
$(BUILD)/bin/bench_optim: $(BUILD)/obj/bench/optim.o $(BENCH_BASE) $(CORE_LIB)
$(BUILD)/bin/bench_reduce: $(BUILD)/obj/bench/reduce.o $(BENCH_BASE) $(CORE_LIB)
$(BUILD)/bin/bench_ckpt: $(BUILD)/obj/bench/ckpt.o $(BENCH_BASE) $(CORE_LIB)
$(BUILD)/bin/bench_tier: $(BUILD)/obj/bench/tier.o $(ENGINE_OBJ) $(ENGINE_GPU) $(CORE_LIB)
$(BUILD)/bin/bench_tier: LDLIBS += $(ENGINE_LIBS)
$(BUILD)/bin/bench_devpush: $(BUILD)/obj/bench/devpush.o $(LIBZS_A) $(CORE_LIB)
BENCH_BINS := $(addprefix $(BUILD)/bin/,coord_rpc bench_coord_scale bench_limits bench_coll bench_transport \
	      bench_optim bench_reduce bench_ckpt bench_tier bench_devpush)
# the tests build the benchmarks too, so that an API change cannot leave
# them broken until the next make bench
check: $(BENCH_BINS) $(BUILD)/lib/libzsbench.so
# the GPU rows (bench/gpu.c, bench/gpu_adamw.py): where nvcc is; they say
# why they print nothing where no device is
ifneq ($(HAVE_NVCC),)
$(BUILD)/bin/bench_gpu: $(BUILD)/obj/bench/gpu.o $(GPU_OBJ) $(LIBZS_A) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(ENGINE_LIBS)
$(BUILD)/obj/bench/gpu.o: TARGET_FLAGS := -I$(CUDA_HOME)/include
$(BUILD)/lib/libzsgpu.so: $(GPU_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(ENGINE_LIBS) -ldl -pthread
GPU_BENCH := $(BUILD)/bin/bench_gpu $(BUILD)/lib/libzsgpu.so
# collective jobs' trainers load the kernels from it
all: $(BUILD)/lib/libzsgpu.so
endif
$(BENCH_BINS):
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# ---------------------------------------------------------------- fuzz
# libFuzzer targets (tests/fuzz/): the data plane as a server runs it, every
# control-plane decoder, the safetensors reader, the job-spec parser, etcd's
# answers as the coordinator decodes them, the launch configuration. Built
# with clang, AddressSanitizer and UBSan into build-fuzz/ (make fuzz-bins
# there); make fuzz runs each for FUZZ_SECONDS, make check for a few.
FUZZ_TARGETS := wire rpc safetensors spec etcd config
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_BUILD := build-fuzz
FUZZ_MAKE = $(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SAN=1 OPT=-O1 \
	    EXTRA_CFLAGS=-fsanitize=fuzzer-no-link fuzz-bins
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
$(BUILD)/fuzz/seeds: $(BUILD)/obj/tests/fuzz/seeds.o $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%) $(BUILD)/fuzz/seeds
fuzz:
	@$(FUZZ_MAKE)
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# the MPI peer, built by bench/run.sh once it installed OpenMPI
$(BUILD)/bin/bench_mpi_coll: bench/mpi_coll.c
	@mkdir -p $(@D)
	mpicc -O2 -Wall -Wextra -o $@ $<

# the kernel and its baselines for the Python peers (bench/adamw_peers.py)
$(BUILD)/lib/libzsbench.so: $(addprefix $(BUILD)/pic/,bench/zsbench.o bench/baselines.o \
			    math/optim.o base/dtype.o net/sockio.o base/util.o base/status.o)
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -o $@ $^ -lm -pthread

bench: $(BINS) $(BUILD)/bin/charlm $(BENCH_BINS) $(GPU_BENCH) $(BUILD)/lib/libzsbench.so
	@bench/run.sh

# the example trains through libzshard; its single-process reference
# (--local) uses the servers' own kernels and job-spec parser
$(BUILD)/bin/charlm: $(BUILD)/obj/examples/charlm.o $(BUILD)/obj/examples/charlm_model.o \
		    $(LIBZS_A) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lopenblas

# a weight reader (include/zshard_reader.h) against libzshard alone
$(BUILD)/bin/read_weights: $(BUILD)/obj/examples/read_weights.o $(LIBZS_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIB_LIBS) -pthread

demo: $(BINS) $(BUILD)/bin/charlm
	@examples/demo.sh

# PyTorch through zshard: torch 2.x from PyPI in a virtual environment kept
# under build/ (tools/torch-venv.sh; minutes the first time), then the GPT
# example on a local cluster
TORCH_VENV := $(BUILD)/torch-venv
torch-venv:
	@sh tools/torch-venv.sh $(TORCH_VENV)
gpt: $(BINS) $(LIBZS_SO) torch-venv
	@ZSHARD_LIB=$(abspath $(LIBZS_SO)) PYTHON=$(abspath $(TORCH_VENV))/bin/python examples/gpt.sh

# the fault matrix: random single-process kills, each recovered without
# hands and checked bitwise (FAULTS="--trials 50 --seed 7" to vary it);
# make check runs one fixed kill of each kind (trainer2: rank 0 killed,
# then its replacement 200 ms into its redo of rank 0's step; a killed
# trainer must not roll the job back; partition: the server cut off
# from step 38 on, so rank 0 arms step 40's checkpoint in it: the arming
# is asked again until the server answers, where the rank once exited)
FAULTS ?= --trials 30
# (150 steps: at 60 a loaded machine's harness once reached step 30 after
# the job had finished, and had no job left to stop)
CHECK_FAULTS ?= --seed 1 --steps 150 --trial trainer:25 --trial server:35 --trial coordinator:15 \
	--trial stop:30 --trial pause:20 --trial partition:38 --trial server:4 --trial tpause:30 \
	--trial trainer2-0-0-200:60
# replicated shards, a job that clips gradients and accumulates them over
# 3 micro-batches (partial pushes): a server killed, a server
# stopped past its lease, one cut off past it (no rollback either), two
# servers killed at once (the checkpoint rollback), a second server killed
# while the first one's new copies are seeded (the two that ended with
# other bits before the trainers sent a new server their tables), a
# trainer killed (its replacement redoes its step: partial pushes and
# terms forwarded to the copies counted once), a trainer that dies just
# after its last push of unit 3 (its replacement's micro-batches of that
# unit acknowledged without waiting for the step: it once waited for the
# clipped step, which waited for its other units), and both trainers
# killed at once (both redo the one step); two servers killed early (the
# first back is failed over and its copies rebuilt, their seeds queued, as
# the second's return rolls the job back: a seed read before the restore
# once reached a copy after its own); the data plane encrypted (data_tls:
# the trainers' connections and the primaries' forwards)
CHECK_FAULTS_REPLICAS ?= --data-tls --replicas 2 --servers 3 --clip --accum 3 --seed 1 --steps 150 --trial server:40 \
	--trial pause:70 --trial partition:50 --trial server2:100 --trial server2:16 --trial server:12 \
	--trial reseed-0-1-1016:18 --trial reseed-0-2-1147:60 --trial trainer:33 \
	--trial tdie-0-3:45 --trial trainers:80
# a server killed at a drawn point between the two ranks' step ends (the
# last rank lags 150 ms a step), trainers that exit when told to resume:
# no wait may run out its step timeout (FAULTS="--kinds skew --lag-ms 150
# --exit-on-resume --trials 30" for more)
CHECK_FAULTS_SKEW ?= --seed 3 --steps 80 --lag-ms 150 --exit-on-resume --kinds skew --trials 2
# the trainers over shared memory (one-sided pushes: PUSH_BEGIN, then PUSH):
# a trainer killed, and rank 0 killed again 200 ms into its replacement's
# redo (whose pushes lost their redo mark over shm, and were counted twice);
# 100 steps: at 60 a replacement over shm once ran every step left within
# the 200 ms, and the second kill found the job done)
CHECK_FAULTS_SHM ?= --seed 1 --steps 100 --transport shm --trial trainer:25 --trial trainer2-0-0-200:30
# and the same with three coordinators on a 3-member etcd cluster: the
# leader killed, the leader stopped past its lease, an etcd member killed,
# a standby killed (FAULTS="--etcd --trials 20" for drawn ones)
CHECK_FAULTS_HA ?= --etcd --seed 1 --steps 150 --trial leader:30 --trial lpause:60 --trial etcd:40 \
	--trial standby:20
# the runbooks of docs/operations.md, each run step by step by its test
# (tests/ops/; make check runs the decommission one)
OPS_TESTS := certs upgrade decommission backup
test-ops: $(BINS) $(BUILD)/bin/charlm
	@sh tests/ops/run.sh $(abspath $(BUILD)/bin) $(OPS_TESTS)

# deploy/slurm/zshard.sbatch run by a one-node Slurm cluster on this
# machine (installs Slurm from Debian when missing; as root)
test-slurm: $(BINS) $(BUILD)/bin/charlm
	@sh tests/deploy/slurm.sh $(abspath $(BUILD)/bin)

# deploy/kubernetes/Containerfile built with podman on a debootstrap'd
# Debian 12 base (kept in $(BUILD)/image-base.tar) and run: a coordinator
# and two servers as containers, trainers from the host (as root)
test-image: $(BINS) $(BUILD)/bin/charlm
	@sh tests/deploy/image.sh $(abspath $(BUILD)/bin) $(abspath $(BUILD))/image-base.tar

test-faults: $(BINS) $(BUILD)/bin/charlm
	@ZSHARD_BIN=$(abspath $(BUILD)/bin) python3 tests/faults/faults.py $(FAULTS)

asan:
	$(MAKE) BUILD=build-asan SAN=1 OPT=-O1 check

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-asan

-include $(shell find $(BUILD)/obj $(BUILD)/pic -name '*.d' 2>/dev/null)
