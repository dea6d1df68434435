#include <zlib.h>

// deflateInit2 is a macro (it passes zlib's version and the stream's size), which Swift cannot call.
static inline int CZlib_deflateInit2(z_streamp stream, int level, int windowBits, int memLevel) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY);
}
