// C++ names to demangle: a member function, a template instance, a
// function in a nested namespace. Each records its return address.
#include <cstdint>
#include <cstdio>

extern "C" char __executable_start;
static volatile int sink;
static std::uintptr_t ras[3];

namespace ns {
namespace detail {
template <typename T>
__attribute__((noinline, noclone)) T twice(T x) {
    ras[0] = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
    sink += 1;
    return x * 2;
}
}  // namespace detail

struct Widget {
    int base;
    __attribute__((noinline, noclone)) int compute(int x) const;
};

int Widget::compute(int x) const {
    ras[1] = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
    int r = detail::twice<int>(x + base); // COMPUTE_CALLS_TWICE
    sink += r;
    return r + 1;
}
}  // namespace ns

__attribute__((noinline, noclone)) int run(const ns::Widget& w) {
    ras[2] = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
    int r = w.compute(3); // RUN_CALLS_COMPUTE
    sink += r;
    return r;
}

int main() {
    ns::Widget w{4};
    int r = run(w); // MAIN_CALLS_RUN
    std::printf("base %lx\n", static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(&__executable_start)));
    for (auto ra : ras) std::printf("ra %lx\n", static_cast<unsigned long>(ra));
    return r == 0;
}
