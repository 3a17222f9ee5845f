#ifndef ZS_VERSION_H
#define ZS_VERSION_H
#define ZS_VERSION "0.1.0"
#endif
