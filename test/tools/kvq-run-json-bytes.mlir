// kvq-run --json is valid UTF-8 JSON whatever bytes its strings hold: a
// model path with a byte that is not UTF-8 (0xff) comes out replaced by
// U+FFFD, never copied raw (which no JSON reader accepts).
// RUN: rm -rf %t && mkdir %t
// RUN: %python -c "import os,shutil,sys; shutil.copy(sys.argv[1], os.fsencode(sys.argv[2]) + b'/m' + bytes([255]) + b'.bin')" %models/stories260K/stories260K.bin %t
// RUN: %python -c "import json,os,subprocess,sys; p = os.fsencode(sys.argv[1]) + b'/m' + bytes([255]) + b'.bin'; out = subprocess.run([sys.argv[2], p, '--tokenizer', sys.argv[3], '--steps', '2', '--method', 'fp16', '--json'], stdout=subprocess.PIPE, check=True).stdout; d = json.loads(out.decode('utf-8')); assert d['model'].endswith('/m' + chr(0xfffd) + '.bin'), d['model']; print('model path', ascii(d['model'][-7:]))" %t kvq-run %models/stories260K/tok512.bin | FileCheck %s
// CHECK: model path '/m\ufffd.bin'
