#ifndef ZS_VERSION_H
#define ZS_VERSION_H
/* zshard's one version: the file VERSION, which make passes in */
#ifndef ZS_VERSION_STRING
#error "ZS_VERSION_STRING is not defined: build with make (it reads the file VERSION)"
#endif
#define ZS_VERSION ZS_VERSION_STRING
#endif
