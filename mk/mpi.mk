# mpi.mk: MPI for distributed training (docs/distributed.md), detected as nvcc is: with Open
# MPI's compiler wrapper (mpicc --showme:compile/--showme:link) or pkg-config ompi-c. Found, the
# library builds trainer/dist_mpi.c (FPLAB_HAVE_MPI) and links libmpi; otherwise
# trainer/dist_nompi.c supplies the same functions for one process. NO_MPI=1 opts out.
# Both files are always compiled; each is empty unless its side of FPLAB_HAVE_MPI is chosen.

DEB_PKGS += libopenmpi-dev openmpi-bin

ifeq ($(NO_MPI),)
MPICC ?= $(shell command -v mpicc 2>/dev/null)
MPI_CFLAGS := $(if $(MPICC),$(shell $(MPICC) --showme:compile 2>/dev/null),)
MPI_LIBS := $(if $(MPICC),$(shell $(MPICC) --showme:link 2>/dev/null),)
ifeq ($(strip $(MPI_LIBS)),)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS := $(shell pkg-config --libs ompi-c 2>/dev/null)
endif
HAVE_MPI := $(if $(strip $(MPI_LIBS)),$(call have_hdr,mpi.h,$(MPI_CFLAGS) $(MPI_LIBS)),)
endif

ifneq ($(HAVE_MPI),)
CFLAGS += -DFPLAB_HAVE_MPI $(MPI_CFLAGS)
LDLIBS += $(MPI_LIBS)
# A static link of libfplab.a needs libmpi too (fplab.pc's Libs.private).
CUDA_LIBS += $(MPI_LIBS)
endif

# A line of its own next to make's "fplab build:" line.
config: mpi-config
.PHONY: mpi-config
mpi-config:
	@echo "fplab build: mpi=$(if $(HAVE_MPI),yes ($(or $(MPICC),pkg-config ompi-c)),no$(if $(NO_MPI), (NO_MPI=1),))"
