# cmake -DINPUT=f -DOUTPUT=f.cc -DNAME=sym -P embed_file.cmake
# Writes a C++ source defining ferry::accel::<NAME> (the bytes of INPUT,
# 64-byte aligned) and <NAME>Size.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by cmake/embed_file.cmake.\n#include <cstddef>\nnamespace ferry::accel {\nalignas(64) extern const unsigned char ${NAME}[] = {\n${body}\n};\nextern const size_t ${NAME}Size = ${bytes};\n}  // namespace ferry::accel\n")
