# zshard - top-level build.
#
#   make            build everything into build/ (installs Debian packages first)
#   make check      build and run every test (unit, integration, rdma)
#   make test-rdma  the rdma transport on Soft-RoCE in a qemu guest
#   make asan       the same tests under AddressSanitizer + UBSan (build-asan/)
#   make demo       the main job on a local cluster
#   make format     clang-format the sources
#
# Optional parts (RDMA, CUDA/NCCL) are detected and announced; the rest of
# zshard builds without them.

BUILD ?= build
CC ?= cc
OPT ?= -O2
SAN ?=

ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif

CFLAGS := -std=gnu11 $(OPT) -g -Wall -Wextra -Wshadow -Wno-missing-field-initializers \
	  -fno-math-errno -ffp-contract=off -pthread -MMD -MP $(SANFLAGS) $(EXTRA_CFLAGS)
CPPFLAGS := -Icommon -Ictrl -Istorage -Iserver -Iclient -I$(BUILD)/gen -D_GNU_SOURCE
LDFLAGS := -pthread $(SANFLAGS)
# -lgrpc -lgpr is all a dynamic link needs (pkg-config lists ~90 absl libs)
LDLIBS := -ljansson -lprotobuf-c -llmdb -lgrpc -lgpr -lm

DEPS_STAMP := $(BUILD)/.deps-ok
GEN := $(BUILD)/gen/zshard.pb-c.c $(BUILD)/gen/zshard.pb-c.h

HAVE_IBVERBS := $(shell test -f /usr/include/infiniband/verbs.h && echo 1)
ifeq ($(HAVE_IBVERBS),1)
CPPFLAGS += -DZS_HAVE_RDMA
LDLIBS += -libverbs
endif
HAVE_NCCL := $(shell test -f /usr/local/cuda/include/nccl.h && echo 1)
RDMA_NOTE := $(if $(HAVE_IBVERBS),libibverbs found,libibverbs-dev not found)
NCCL_NOTE := $(if $(HAVE_NCCL),found under /usr/local/cuda,not found)
ifeq ($(MAKELEVEL),0)
$(info zshard: optional parts: rdma: $(RDMA_NOTE)$(if $(HAVE_IBVERBS),, - the rdma transport is left out); nccl: $(NCCL_NOTE), transport not yet built)
endif

CORE_SRC := common/status.c common/log.c common/util.c common/model.c common/spec_json.c common/wire.c common/safetensors.c common/plan.c \
	    common/sockio.c common/listener.c common/stream.c common/tcp.c common/shm.c common/rdma.c \
	    ctrl/rpc.c ctrl/codec.c ctrl/coord_client.c storage/kv.c storage/ckpt.c
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/zshard.pb-c.o
CORE_LIB := $(BUILD)/lib/libzscore.a

COORD_OBJ := $(addprefix $(BUILD)/obj/server/,coordinator_main.o coord.o placement.o)
SERVER_OBJ := $(addprefix $(BUILD)/obj/server/,server_main.o engine.o optim.o)
CTL_OBJ := $(addprefix $(BUILD)/obj/client/,zshardctl.o jobio.o) $(BUILD)/obj/server/optim.o

BINS := $(BUILD)/bin/zshard-coordinator $(BUILD)/bin/zshard-server $(BUILD)/bin/zshardctl

# libzshard: the trainer's library, static and shared
LIB_OBJ := $(BUILD)/obj/client/zshard.o $(BUILD)/obj/server/optim.o
LIBZS_A := $(BUILD)/lib/libzshard.a
LIBZS_SO := $(BUILD)/lib/libzshard.so

UNIT_TESTS := placement codec kv util spec_json optim wire transport engine plan
INTEG_TESTS := cluster train
TEST_BINS := $(UNIT_TESTS:%=$(BUILD)/tests/test_%) $(INTEG_TESTS:%=$(BUILD)/tests/test_%)
TEST_HARNESS := $(BUILD)/obj/tests/harness.o

.PHONY: all check test-rdma asan demo bench format clean deps
all: $(BINS) $(LIBZS_A) $(LIBZS_SO) $(BUILD)/bin/charlm $(TEST_BINS)

$(LIBZS_A): $(LIB_OBJ) $(CORE_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^
# the shared library is built from position-independent objects of its own
PIC_OBJ := $(patsubst $(BUILD)/obj/%.o,$(BUILD)/pic/%.o,$(LIB_OBJ) $(CORE_OBJ))
$(BUILD)/pic/gen/%.o: $(BUILD)/gen/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -Wno-unused-parameter -c -o $@ $<
$(BUILD)/pic/%.o: %.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TARGET_FLAGS) -fPIC -c -o $@ $<
$(LIBZS_SO): $(PIC_OBJ)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libzshard.so -o $@ $^ $(LDLIBS)

deps: $(DEPS_STAMP)
$(DEPS_STAMP): tools/install-deps.sh
	@sh tools/install-deps.sh
	@mkdir -p $(@D) && touch $@

$(GEN): proto/zshard.proto $(DEPS_STAMP)
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen -Iproto proto/zshard.proto

$(BUILD)/obj/gen/zshard.pb-c.o: $(BUILD)/gen/zshard.pb-c.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -c -o $@ $<

# every object waits for the generated header (only ctrl/ includes it)
$(BUILD)/obj/%.o: %.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TARGET_FLAGS) -c -o $@ $<

# the math runs at -O3 (GCC 12 does not vectorize these loops at -O2); it is
# elementwise IEEE arithmetic, so every vector width gives the same bits
$(BUILD)/obj/server/optim.o $(BUILD)/pic/server/optim.o: TARGET_FLAGS := -O3

$(CORE_LIB): $(CORE_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(BUILD)/bin/zshard-coordinator: $(COORD_OBJ) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/zshard-server: $(SERVER_OBJ) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/zshardctl: $(CTL_OBJ) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/test_placement: $(BUILD)/obj/tests/unit/test_placement.o $(BUILD)/obj/server/placement.o $(CORE_LIB)
$(BUILD)/tests/test_codec: $(BUILD)/obj/tests/unit/test_codec.o $(CORE_LIB)
$(BUILD)/tests/test_kv: $(BUILD)/obj/tests/unit/test_kv.o $(CORE_LIB)
$(BUILD)/tests/test_util: $(BUILD)/obj/tests/unit/test_util.o $(CORE_LIB)
$(BUILD)/tests/test_plan: $(BUILD)/obj/tests/unit/test_plan.o $(CORE_LIB)
$(BUILD)/tests/test_spec_json: $(BUILD)/obj/tests/unit/test_spec_json.o $(CORE_LIB)
$(BUILD)/tests/test_optim: $(BUILD)/obj/tests/unit/test_optim.o $(BUILD)/obj/server/optim.o $(CORE_LIB)
$(BUILD)/tests/test_wire: $(BUILD)/obj/tests/unit/test_wire.o $(CORE_LIB)
$(BUILD)/tests/test_transport: $(BUILD)/obj/tests/unit/test_transport.o $(CORE_LIB)
$(BUILD)/tests/test_engine: $(BUILD)/obj/tests/unit/test_engine.o $(BUILD)/obj/tests/oracle.o $(addprefix $(BUILD)/obj/server/,engine.o optim.o placement.o) $(CORE_LIB)
$(BUILD)/tests/test_train: $(BUILD)/obj/tests/integration/test_train.o $(TEST_HARNESS) $(BUILD)/obj/tests/oracle.o $(LIBZS_A)
$(BUILD)/tests/test_cluster: $(BUILD)/obj/tests/integration/test_cluster.o $(TEST_HARNESS) $(CORE_LIB)
$(BUILD)/obj/tests/%.o: tests/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -c -o $@ $<
$(TEST_BINS):
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# check: the tests, then the rdma ones on Soft-RoCE in qemu (test-rdma; it
# says why when it cannot run: no root to install qemu, no RDMA in the build)
check: all
	@ZSHARD_BIN=$(abspath $(BUILD)/bin) sh tests/run-tests.sh $(BUILD)/tests $(UNIT_TESTS) $(INTEG_TESTS); \
	rc=$$?; \
	if [ "$(SAN)" = 1 ]; then echo "check: rdma on Soft-RoCE skipped under the sanitizers (make check runs it)"; exit $$rc; fi; \
	sh tests/rdma/run.sh $(BUILD); r=$$?; \
	if [ $$r -eq 77 ]; then echo "check: rdma on Soft-RoCE skipped (the reason is above)"; r=0; \
	elif [ $$r -eq 0 ]; then echo "check: rdma on Soft-RoCE passed"; else echo "check: rdma on Soft-RoCE FAILED"; fi; \
	[ $$rc -eq 0 ] && [ $$r -eq 0 ]

test-rdma: all
	@sh tests/rdma/run.sh $(BUILD)

$(BUILD)/bin/coord_rpc: $(BUILD)/obj/bench/coord_rpc.o $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

BENCH_BASE := $(BUILD)/obj/bench/baselines.o

$(BUILD)/bin/bench_limits: $(BUILD)/obj/bench/limits.o $(BENCH_BASE) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/bench_coll: $(BUILD)/obj/bench/coll.o $(LIBZS_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the MPI peer, built by bench/run.sh once it installed OpenMPI
$(BUILD)/bin/bench_mpi_coll: bench/mpi_coll.c
	@mkdir -p $(@D)
	mpicc -O2 -Wall -Wextra -o $@ $<

$(BUILD)/bin/bench_transport: $(BUILD)/obj/bench/transport.o $(BENCH_BASE) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/bench_optim: $(BUILD)/obj/bench/optim.o $(BUILD)/obj/server/optim.o $(BENCH_BASE) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -lm

$(BUILD)/bin/bench_ckpt: $(BUILD)/obj/bench/ckpt.o $(BENCH_BASE) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/bench_tier: $(BUILD)/obj/bench/tier.o $(addprefix $(BUILD)/obj/server/,engine.o optim.o placement.o) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: $(BINS) $(BUILD)/bin/charlm $(BUILD)/bin/bench_limits $(BUILD)/bin/bench_coll $(BUILD)/bin/coord_rpc $(BUILD)/bin/bench_transport $(BUILD)/bin/bench_optim $(BUILD)/bin/bench_ckpt $(BUILD)/bin/bench_tier
	@bench/run.sh

$(BUILD)/bin/charlm: $(BUILD)/obj/examples/charlm.o $(LIBZS_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lopenblas

demo: $(BINS) $(BUILD)/bin/charlm
	@examples/demo.sh

asan:
	$(MAKE) BUILD=build-asan SAN=1 OPT=-O1 check

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
