#define _GNU_SOURCE
/* Ask NVIDIA's driver about export tables, green contexts and the legacy launch API (gcc -ldl; prints JSON).
 * The first run (tests/data/nvidia_export_tables_13.json) crashed after the tables with stdout buffered, so
 * where is unknown: stdout is now unbuffered, so a rerun shows the last answer before a crash. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
typedef int (*fn)();
static void *h;
#define F(n) ((fn)dlsym(h, #n))
static void hexid(const char *s, unsigned char *o){for(int i=0;i<16;i++){unsigned v;sscanf(s+2*i,"%2x",&v);o[i]=v;}}
int main(void){
  setvbuf(stdout,NULL,_IONBF,0);
  h=dlopen("libcuda.so.1",RTLD_NOW); if(!h){printf("{\"error\":\"no libcuda\"}\n");return 1;}
  Dl_info base; dladdr(dlsym(h,"cuInit"),&base);
  printf("{\n\"cuInit\": %d,\n", F(cuInit)(0));
  int dv=0; F(cuDriverGetVersion)(&dv); printf("\"driver_version\": %d,\n", dv);
  void *ctx=0; F(cuDevicePrimaryCtxRetain)(&ctx,0); F(cuCtxSetCurrent)(ctx);
  void *stream=0; printf("\"cuStreamCreate\": %d,\n", F(cuStreamCreate)(&stream,0));
  const char *ids[]={"21318c60971432488ca641ff7324c8f2","f8cff95121468b4eb9e2fb469e7c0dd9","da9151d33ae6cc41a5c04f26d533e328",
   "42d85a8123f6cb478298f6e78a3aecdc","a094798c2e742e7493f20800200c0a66","6bd5fb6c5bf4e74a8987d93912fd9df9"};
  printf("\"tables\": {\n");
  for(int t=0;t<6;t++){unsigned char id[16];hexid(ids[t],id);const void **tab=0;int r=F(cuGetExportTable)(&tab,id);
    printf("  \"%s\": {\"rc\": %d", ids[t], r);
    if(!r&&tab){uint64_t s=(uint64_t)tab[0];printf(", \"slot0\": %llu, \"slots\": [",(unsigned long long)s);
      int n=(s>=8&&s<2048&&s%8==0)?(int)(s/8):48;
      for(int i=1;i<n;i++){Dl_info d;const void*p=tab[i];long off=-1;if(p&&dladdr(p,&d))off=(long)((char*)p-(char*)d.dli_fbase);
        printf("%s%ld",i>1?", ":"",p?off:0L);} printf("]");}
    printf("}%s\n",t<5?",":"");fflush(stdout);}
  printf("},\n");
  /* green contexts on an ordinary stream and bad input */
  void *g=(void*)1; int r=F(cuStreamGetGreenCtx)(stream,&g); printf("\"StreamGetGreenCtx_ordinary\": [%d, %d],\n",r,g!=0);
  g=(void*)1; r=F(cuStreamGetGreenCtx)(0,&g); printf("\"StreamGetGreenCtx_null_stream\": [%d, %d],\n",r,g!=0);
  r=F(cuStreamGetGreenCtx)(stream,0); printf("\"StreamGetGreenCtx_null_out\": %d,\n",r);
  void *c2=0; g=(void*)1; r=F(cuStreamGetCtx_v2)(stream,&c2,&g); printf("\"StreamGetCtx_v2\": [%d, %d, %d],\n",r,c2==ctx,g!=0);
  unsigned char res[256]; memset(res,0xee,sizeof res); r=F(cuDeviceGetDevResource)(0,res,1);
  unsigned *u=(unsigned*)(res+96); printf("\"DeviceGetDevResource_sm\": [%d, %u, %u, %u, %u],\n",r,*(unsigned*)res,u[0],u[1],u[2]);
  int smc=0; F(cuDeviceGetAttribute)(&smc,16,0); printf("\"sm_count\": %d,\n",smc);
  r=F(cuDeviceGetDevResource)(0,res,0); printf("\"DeviceGetDevResource_type0\": %d,\n",r);
  r=F(cuDeviceGetDevResource)(0,res,99); printf("\"DeviceGetDevResource_type99\": %d,\n",r);
  r=F(cuDeviceGetDevResource)(0,0,1); printf("\"DeviceGetDevResource_null\": %d,\n",r);
  r=F(cuDeviceGetDevResource)(99,res,1); printf("\"DeviceGetDevResource_baddev\": %d,\n",r);
  unsigned char cres[256]; r=F(cuCtxGetDevResource)(ctx,cres,1); printf("\"CtxGetDevResource\": [%d, %u],\n",r,*(unsigned*)(cres+96));
  F(cuDeviceGetDevResource)(0,res,1);
  int mins[]={1,2,7,8,16,40,132,133,0};
  printf("\"split\": [\n");
  for(int k=0;k<9;k++){unsigned nb=0;unsigned char rem[256];memset(rem,0,sizeof rem);
    r=F(cuDevSmResourceSplitByCount)(0,&nb,res,rem,0,mins[k]);
    unsigned char out[64*144]; unsigned nb2=nb; int r2=-1; if(!r&&nb){r2=F(cuDevSmResourceSplitByCount)(out,&nb2,res,rem,0,mins[k]);}
    printf("  {\"min\": %d, \"count_rc\": %d, \"nb\": %u, \"rc\": %d, \"nb2\": %u, \"each\": %u, \"rem\": [%u, %u]}%s\n",mins[k],r,nb,r2,nb2,
      r2==0?*(unsigned*)(out+96):0,*(unsigned*)rem,*(unsigned*)(rem+96),k<8?",":"");}
  printf("],\n");
  unsigned nb=2; unsigned char out[4*144]; unsigned char rem[256];
  r=F(cuDevSmResourceSplitByCount)(out,&nb,res,rem,0,8); printf("\"split2x8\": [%d, %u, %u, %u, %u],\n",r,nb,*(unsigned*)(out+96),*(unsigned*)(out+144+96),*(unsigned*)(rem+96));
  r=F(cuDevSmResourceSplitByCount)(out,0,res,rem,0,8); printf("\"split_null_nb\": %d,\n",r);
  r=F(cuDevSmResourceSplitByCount)(out,&nb,0,rem,0,8); printf("\"split_null_input\": %d,\n",r);
  nb=1; r=F(cuDevSmResourceSplitByCount)(out,&nb,res,rem,5,8); printf("\"split_bad_flags\": %d,\n",r);
  void *desc=0; r=F(cuDevResourceGenerateDesc)(&desc,out,1); printf("\"GenerateDesc\": %d,\n",r);
  r=F(cuDevResourceGenerateDesc)(&desc,out,0); printf("\"GenerateDesc_zero\": %d,\n",r);
  r=F(cuDevResourceGenerateDesc)(0,out,1); printf("\"GenerateDesc_null\": %d,\n",r);
  F(cuDevResourceGenerateDesc)(&desc,out,1);
  void *gc=0; r=F(cuGreenCtxCreate)(&gc,desc,0,0); printf("\"GreenCtxCreate_flags0\": %d,\n",r);
  if(r){r=F(cuGreenCtxCreate)(&gc,desc,0,1);} printf("\"GreenCtxCreate_flags1\": %d,\n",r);
  void *gctx=0; r=F(cuCtxFromGreenCtx)(&gctx,gc); printf("\"CtxFromGreenCtx\": [%d, %d],\n",r,gctx!=0&&gctx!=ctx);
  unsigned char gres[256]; r=F(cuGreenCtxGetDevResource)(gc,gres,1); printf("\"GreenCtxGetDevResource\": [%d, %u],\n",r,*(unsigned*)(gres+96));
  r=F(cuCtxGetDevResource)(gctx,gres,1); printf("\"CtxGetDevResource_green\": [%d, %u],\n",r,*(unsigned*)(gres+96));
  void *gs=0; r=F(cuGreenCtxStreamCreate)(&gs,gc,0,0); printf("\"GreenCtxStreamCreate_flags0\": %d,\n",r);
  r=F(cuGreenCtxStreamCreate)(&gs,gc,1,0); printf("\"GreenCtxStreamCreate_flags1\": %d,\n",r);
  g=0; r=F(cuStreamGetGreenCtx)(gs,&g); printf("\"StreamGetGreenCtx_green\": [%d, %d],\n",r,g==gc);
  c2=0; g=0; r=F(cuStreamGetCtx_v2)(gs,&c2,&g); printf("\"StreamGetCtx_v2_green\": [%d, %d, %d],\n",r,c2==0,g==gc);
  c2=0; r=F(cuStreamGetCtx)(gs,&c2); printf("\"StreamGetCtx_green\": [%d, %d],\n",r,c2==gctx);
  void *ev=0; F(cuEventCreate)(&ev,0); r=F(cuGreenCtxRecordEvent)(gc,ev); printf("\"GreenCtxRecordEvent\": %d,\n",r);
  r=F(cuGreenCtxWaitEvent)(gc,ev); printf("\"GreenCtxWaitEvent\": %d,\n",r);
  r=F(cuGreenCtxRecordEvent)(gc,0); printf("\"GreenCtxRecordEvent_null\": %d,\n",r);
  r=F(cuGreenCtxRecordEvent)(0,ev); printf("\"GreenCtxRecordEvent_nullctx\": %d,\n",r);
  r=F(cuCtxSetCurrent)(gctx); void *cur=0; F(cuCtxGetCurrent)(&cur); printf("\"SetCurrent_green\": [%d, %d],\n",r,cur==gctx);
  void *dp=0; r=F(cuMemAlloc_v2)(&dp,1024); printf("\"MemAlloc_in_green\": %d,\n",r); F(cuMemFree_v2)(dp);
  F(cuCtxSetCurrent)(ctx);
  r=F(cuStreamDestroy_v2)(gs); printf("\"StreamDestroy_green\": %d,\n",r);
  r=F(cuGreenCtxDestroy)(gc); printf("\"GreenCtxDestroy\": %d,\n",r);
  r=F(cuGreenCtxDestroy)(0); printf("\"GreenCtxDestroy_null\": %d,\n",r);
  r=F(cuCtxFromGreenCtx)(&gctx,0); printf("\"CtxFromGreenCtx_null\": %d,\n",r);
  r=F(cuGreenCtxCreate)(&gc,0,0,1); printf("\"GreenCtxCreate_nulldesc\": %d,\n",r);
  /* legacy API answers */
  unsigned cnt=0; void *ac=0; r=F(cuCtxAttach)(&ac,0); printf("\"CtxAttach\": [%d, %d],\n",r,ac==ctx);
  r=F(cuCtxAttach)(&ac,1); printf("\"CtxAttach_flags1\": %d,\n",r);
  r=F(cuCtxAttach)(0,0); printf("\"CtxAttach_null\": %d,\n",r);
  r=F(cuCtxDetach)(ctx); printf("\"CtxDetach\": %d,\n",r);
  r=F(cuCtxDetach)(0); printf("\"CtxDetach_null\": %d,\n",r);
  void *cc=0; F(cuCtxCreate_v2)(&cc,0,0); r=F(cuCtxGetApiVersion)(cc,&cnt);
  r=F(cuCtxAttach)(&ac,0); printf("\"CtxAttach_created\": [%d, %d],\n",r,ac==cc);
  r=F(cuCtxDetach)(cc); printf("\"CtxDetach_created1\": %d,\n",r);
  r=F(cuCtxDetach)(cc); printf("\"CtxDetach_created2\": %d,\n",r);
  void *cur2=(void*)1; F(cuCtxGetCurrent)(&cur2); printf("\"current_after_detach\": %d,\n",cur2==0?0:(cur2==ctx?1:2));
  r=F(cuCtxDetach)(cc); printf("\"CtxDetach_destroyed\": %d,\n",r);
  F(cuCtxSetCurrent)(ctx);
  r=F(cuFuncSetBlockShape)(0,1,1,1); printf("\"FuncSetBlockShape_null\": %d,\n",r);
  r=F(cuParamSetSize)(0,8); printf("\"ParamSetSize_null\": %d,\n",r);
  r=F(cuLaunchGrid)(0,1,1); printf("\"LaunchGrid_null\": %d,\n",r);
  r=F(cuLaunch)(0); printf("\"Launch_null\": %d,\n",r);
  const char *ptx=".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry k(.param .u64 p, .param .u32 v, .param .f32 f){\n.reg .u64 %rd<4>;.reg .u32 %r<6>;.reg .f32 %f<3>;\nld.param.u64 %rd1,[p];ld.param.u32 %r1,[v];ld.param.f32 %f1,[f];mov.u32 %r2,%tid.x;mov.u32 %r3,%ctaid.x;mov.u32 %r4,%ntid.x;mad.lo.u32 %r5,%r3,%r4,%r2;\ncvta.to.global.u64 %rd2,%rd1;mul.wide.u32 %rd3,%r5,4;add.u64 %rd2,%rd2,%rd3;cvt.rn.f32.u32 %f2,%r5;mul.f32 %f2,%f2,%f1;st.global.f32 [%rd2],%f2;ret;}\n";
  void *mod=0,*fun=0; r=F(cuModuleLoadData)(&mod,ptx); printf("\"ModuleLoad\": %d,\n",r); F(cuModuleGetFunction)(&fun,mod,"k");
  r=F(cuLaunch)(fun); printf("\"Launch_noshape\": %d,\n",r); F(cuCtxSynchronize)();
  r=F(cuParamSetSize)(fun,16); printf("\"ParamSetSize\": %d,\n",r);
  r=F(cuParamSetSize)(fun,5000); printf("\"ParamSetSize_5000\": %d,\n",r);
  F(cuParamSetSize)(fun,16);
  void *d=0; F(cuMemAlloc_v2)(&d,64*4*4); r=F(cuParamSetv)(fun,0,&d,8); printf("\"ParamSetv\": %d,\n",r);
  r=F(cuParamSetv)(fun,5000,&d,8); printf("\"ParamSetv_oob\": %d,\n",r);
  r=F(cuParamSeti)(fun,8,7); printf("\"ParamSeti\": %d,\n",r);
  r=((int(*)(void*,int,float))dlsym(h,"cuParamSetf"))(fun,12,0.5f); printf("\"ParamSetf\": %d,\n",r);
  r=F(cuFuncSetBlockShape)(fun,64,1,1); printf("\"FuncSetBlockShape\": %d,\n",r);
  r=F(cuFuncSetBlockShape)(fun,0,1,1); printf("\"FuncSetBlockShape_0\": %d,\n",r);
  r=F(cuFuncSetBlockShape)(fun,2048,1,1); printf("\"FuncSetBlockShape_2048\": %d,\n",r);
  F(cuFuncSetBlockShape)(fun,64,1,1);
  r=F(cuFuncSetSharedSize)(fun,128); printf("\"FuncSetSharedSize\": %d,\n",r);
  r=F(cuLaunchGrid)(fun,4,1); int s=F(cuCtxSynchronize)(); printf("\"LaunchGrid\": [%d, %d],\n",r,s);
  float hv[256]; F(cuMemcpyDtoH_v2)(hv,d,sizeof hv); int bad=0; for(int i=0;i<256;i++) if(hv[i]!=i*0.5f) bad++; printf("\"LaunchGrid_bad\": %d,\n",bad);
  r=F(cuLaunchGridAsync)(fun,2,1,stream); s=F(cuStreamSynchronize)(stream); printf("\"LaunchGridAsync\": [%d, %d],\n",r,s);
  r=F(cuLaunchGrid)(fun,0,1); printf("\"LaunchGrid_0\": %d,\n",r);
  r=F(cuParamSetTexRef)(fun,-1,0); printf("\"ParamSetTexRef_null\": %d,\n",r);
  r=F(cuLaunch)(fun); s=F(cuCtxSynchronize)(); printf("\"Launch\": [%d, %d],\n",r,s);
  F(cuParamSetSize)(fun,8); r=F(cuLaunchGrid)(fun,1,1); s=F(cuCtxSynchronize)(); printf("\"LaunchGrid_short_params\": [%d, %d],\n",r,s);
  fflush(stdout);
  /* 21318c60 slots 51 and 39 as the 13.5 runtime's tools path calls them: (ctx, stream, &out, 1), (ctx, out, &out2) */
  unsigned char id[16]; hexid(ids[0],id); const void **tab=0; F(cuGetExportTable)(&tab,id);
  for(int k=0;k<2&&tab;k++){ uint64_t o=0xdeadbeef,o2=0xdeadbeef;
      int r1=((int(*)(void*,void*,uint64_t*,int))tab[51])(k?0:ctx,stream,&o,1);
      printf("\"slot51_%s\": [%d, %llu],\n",k?"nullctx":"ctx",r1,(unsigned long long)o); fflush(stdout);
      int r2=((int(*)(void*,uint64_t,uint64_t*))tab[39])(k?0:ctx,o,&o2);
      printf("\"slot39_%s\": [%d, %llu],\n",k?"nullctx":"ctx",r2,(unsigned long long)o2); fflush(stdout);}
  printf("\"done\": 1\n}\n"); return 0;}
