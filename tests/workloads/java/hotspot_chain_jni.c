/* The native half of HotspotChain.callBack(): C called from Java that calls
 * back into Java (HotspotChain.fromNative), for hotspot_live.rs. */
#include <jni.h>

JNIEXPORT void JNICALL Java_HotspotChain_callBack(JNIEnv *env, jclass cls) {
    jmethodID from_native = (*env)->GetStaticMethodID(env, cls, "fromNative", "()V");
    if (from_native != NULL) {
        (*env)->CallStaticVoidMethod(env, cls, from_native);
    }
}
