/* A PKCS#11 module in front of another one (SoftHSM, named by $SHIM_REAL), for the faults a real
 * token shows and SoftHSM cannot be made to: built by test/helpers/pkcs11-shim.ts with the
 * machine's gcc. Every setting is read from the environment at each call, so a test switches a
 * fault on and off by creating and removing files.
 *  - $SHIM_HANG_<FUNCTION> (e.g. SHIM_HANG_C_SIGN, SHIM_HANG_C_SIGNINIT, SHIM_HANG_C_LOGIN): that
 *    call waits while the file it names exists (a token that stops answering), at most
 *    $SHIM_HANG_MAX_MS when set; with $SHIM_HANG_LOST set, a call that found the file keeps
 *    waiting once it is gone (a request the network lost: only new calls are answered);
 *  - $SHIM_SET_PIN, $SHIM_LOGOUT, $SHIM_CLOSE_ALL: the next C_SignInit first changes the user's
 *    PIN (the file holds the old and the new one, a line each: an administrator rotating it), logs
 *    the application out, or closes every session of the slot, as an HSM failover or another part
 *    of the application would, and removes the file;
 *  - $SHIM_TRACE: one line per call, "<function> 0x<return code>" (never a PIN or a digest);
 *  - $SHIM_LOG: a line whenever two threads are in one session at once (PKCS#11 forbids it). */
#include "pkcs11.h" /* pkcs11js's copy of the OASIS header (it defines the platform macros) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static CK_FUNCTION_LIST real_list, shim_list;
static CK_FUNCTION_LIST_PTR real;
static volatile int busy[4096];

static void append(const char *variable, const char *line) {
  const char *path = getenv(variable);
  FILE *f = path ? fopen(path, "a") : NULL;
  if (f) { fputs(line, f); fclose(f); }
}

static void trace(const char *fn, CK_RV rv) {
  char line[96];
  snprintf(line, sizeof line, "%s 0x%lx\n", fn, (unsigned long)rv);
  append("SHIM_TRACE", line);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Waits while $SHIM_HANG_<variable> names a file that exists. */
static void hang(const char *variable) {
  const char *path = getenv(variable);
  if (!path) return;
  const char *max = getenv("SHIM_HANG_MAX_MS");
  double until = max ? now_ms() + atof(max) : 0;
  int lost = getenv("SHIM_HANG_LOST") != NULL && access(path, F_OK) == 0;
  while ((lost || access(path, F_OK) == 0) && (!max || now_ms() < until)) usleep(5000);
}

/* True once for each time the file $variable names is created: whoever removes it acts. */
static int triggered(const char *variable) {
  const char *path = getenv(variable);
  return path && unlink(path) == 0;
}

static void enter(CK_SESSION_HANDLE s, const char *fn) {
  int n = __sync_add_and_fetch(&busy[s % 4096], 1);
  if (n > 1) {
    char line[128];
    snprintf(line, sizeof line, "session %lu used by %d threads at once (%s)\n", (unsigned long)s, n, fn);
    append("SHIM_LOG", line);
  }
}
static void leave(CK_SESSION_HANDLE s) { __sync_sub_and_fetch(&busy[s % 4096], 1); }

/* A session call: hang point, the thread check, the real call, the trace. */
#define SESSION_CALL(fn, hangvar, call) \
  enter(s, #fn);                        \
  hang(hangvar);                        \
  CK_RV rv = call;                      \
  leave(s);                             \
  trace(#fn, rv);                       \
  return rv;

static CK_RV shim_OpenSession(CK_SLOT_ID slot, CK_FLAGS flags, CK_VOID_PTR app, CK_NOTIFY notify, CK_SESSION_HANDLE_PTR out) {
  hang("SHIM_HANG_C_OPENSESSION");
  CK_RV rv = real->C_OpenSession(slot, flags, app, notify, out);
  trace("C_OpenSession", rv);
  return rv;
}
static CK_RV shim_CloseSession(CK_SESSION_HANDLE s) {
  SESSION_CALL(C_CloseSession, "SHIM_HANG_C_CLOSESESSION", real->C_CloseSession(s))
}
static CK_RV shim_Login(CK_SESSION_HANDLE s, CK_USER_TYPE u, CK_UTF8CHAR_PTR p, CK_ULONG l) {
  SESSION_CALL(C_Login, "SHIM_HANG_C_LOGIN", real->C_Login(s, u, p, l))
}
static CK_RV shim_FindObjectsInit(CK_SESSION_HANDLE s, CK_ATTRIBUTE_PTR t, CK_ULONG n) {
  SESSION_CALL(C_FindObjectsInit, "SHIM_HANG_C_FINDOBJECTSINIT", real->C_FindObjectsInit(s, t, n))
}
static CK_RV shim_FindObjects(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE_PTR o, CK_ULONG m, CK_ULONG_PTR c) {
  SESSION_CALL(C_FindObjects, "SHIM_HANG_C_FINDOBJECTS", real->C_FindObjects(s, o, m, c))
}
static CK_RV shim_FindObjectsFinal(CK_SESSION_HANDLE s) {
  SESSION_CALL(C_FindObjectsFinal, "SHIM_HANG_C_FINDOBJECTSFINAL", real->C_FindObjectsFinal(s))
}
static CK_RV shim_GetAttributeValue(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n) {
  SESSION_CALL(C_GetAttributeValue, "SHIM_HANG_C_GETATTRIBUTEVALUE", real->C_GetAttributeValue(s, o, t, n))
}
/* The PIN changed as the file $SHIM_SET_PIN says ("old\nnew\n"), in a read-write session of its own. */
static void set_pin(CK_SESSION_HANDLE s) {
  const char *path = getenv("SHIM_SET_PIN");
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) return;
  char old_pin[128] = "", new_pin[128] = "";
  int read = fscanf(f, "%127s %127s", old_pin, new_pin);
  fclose(f);
  if (read != 2 || unlink(path) != 0) return;
  CK_SESSION_INFO info;
  CK_SESSION_HANDLE rw;
  if (real->C_GetSessionInfo(s, &info) != CKR_OK) return;
  if (real->C_OpenSession(info.slotID, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &rw) != CKR_OK) return;
  real->C_SetPIN(rw, (CK_UTF8CHAR_PTR)old_pin, strlen(old_pin), (CK_UTF8CHAR_PTR)new_pin, strlen(new_pin));
  real->C_CloseSession(rw);
}

static CK_RV shim_SignInit(CK_SESSION_HANDLE s, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k) {
  set_pin(s);
  if (triggered("SHIM_LOGOUT")) real->C_Logout(s);
  if (triggered("SHIM_CLOSE_ALL")) {
    CK_SESSION_INFO info;
    if (real->C_GetSessionInfo(s, &info) == CKR_OK) real->C_CloseAllSessions(info.slotID);
  }
  SESSION_CALL(C_SignInit, "SHIM_HANG_C_SIGNINIT", real->C_SignInit(s, m, k))
}
static CK_RV shim_Sign(CK_SESSION_HANDLE s, CK_BYTE_PTR d, CK_ULONG dl, CK_BYTE_PTR sig, CK_ULONG_PTR sl) {
  SESSION_CALL(C_Sign, "SHIM_HANG_C_SIGN", real->C_Sign(s, d, dl, sig, sl))
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR out) {
  if (!real) {
    void *h = dlopen(getenv("SHIM_REAL"), RTLD_NOW | RTLD_LOCAL);
    if (!h) return CKR_GENERAL_ERROR;
    CK_RV (*get)(CK_FUNCTION_LIST_PTR_PTR) = (CK_RV (*)(CK_FUNCTION_LIST_PTR_PTR))dlsym(h, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR list;
    if (!get || get(&list) != CKR_OK) return CKR_GENERAL_ERROR;
    real_list = *list;
    real = &real_list;
    shim_list = real_list;
    shim_list.C_OpenSession = shim_OpenSession;
    shim_list.C_CloseSession = shim_CloseSession;
    shim_list.C_Login = shim_Login;
    shim_list.C_FindObjectsInit = shim_FindObjectsInit;
    shim_list.C_FindObjects = shim_FindObjects;
    shim_list.C_FindObjectsFinal = shim_FindObjectsFinal;
    shim_list.C_GetAttributeValue = shim_GetAttributeValue;
    shim_list.C_SignInit = shim_SignInit;
    shim_list.C_Sign = shim_Sign;
  }
  *out = &shim_list;
  return CKR_OK;
}
