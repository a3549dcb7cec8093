#!/bin/sh
# The simulated libraries export CUDA's names and nothing else: libcuda.so.1
# cu* (and simgpu_* for tests), libcudart.so.13 cuda* and __cuda*, all under
# the version node libcudart.so.13; and the runtime has no link to the driver.
set -e
fail=0
extra=$(nm -D --defined-only "$SIM/libcuda.so.1" | awk '{print $3}' | grep -Ev '^(cu[A-Z]|simgpu_)' || true)
[ -z "$extra" ] || { echo "sim-exports: libcuda.so.1 exports $extra"; fail=1; }
extra=$(nm -D --defined-only "$SIM/libcudart.so.13" | awk '$3 != "libcudart.so.13" {print $3}' |
        grep -Ev '^(cuda|__cuda)[A-Za-z_0-9]*@@libcudart\.so\.13$' || true)
[ -z "$extra" ] || { echo "sim-exports: libcudart.so.13 exports $extra"; fail=1; }
if readelf -d "$SIM/libcudart.so.13" | grep NEEDED | grep -q libcuda; then
    echo "sim-exports: libcudart.so.13 links libcuda; it must dlopen it"; fail=1
fi
for lib in libcuda.so.1 libcudart.so.13; do
    soname=$(readelf -d "$SIM/$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    [ "$soname" = "$lib" ] || { echo "sim-exports: $lib has soname '$soname'"; fail=1; }
done
[ $fail = 0 ] && echo "sim-exports: $(nm -D --defined-only "$SIM/libcuda.so.1" | grep -c ' T ') driver and $(nm -D --defined-only "$SIM/libcudart.so.13" | grep -c ' T ') runtime functions, names and sonames right"
exit $fail
