#include <zlib.h>

// deflateInit2 is a macro (it passes zlib's version and the stream's size), which Swift cannot call.
static inline int CZlib_deflateInit2(z_streamp stream, int level, int windowBits, int memLevel) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY);
}

// inflateInit2 is a macro for the same reason.
static inline int CZlib_inflateInit2(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}
